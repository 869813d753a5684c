"""The demo's live server: appends the records of a real general log to a followed file, now.

`./dev demo` runs this as a child so that one source keeps delivering while the demo runs:
`python -m devtools.demofeed SAMPLE TARGET`. The records (connection ids, commands, statements)
are those the real MariaDB wrote into SAMPLE; only their time is the time of writing, printed as
MariaDB prints it (`YYMMDD H:MM:SS`, UTC, once per second that has records). When the sample is
used up it starts again with every connection id raised past the previous round's, as a server
that keeps numbering its connections would, so nothing reads as a restart or a reused id.

No Django here: this is a writer, not a reader.
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

# A record's first line: the time (or the two tabs MariaDB writes when the second has not
# changed), the connection id right-aligned in six columns, the command and its argument.
_RECORD = re.compile(
    rb"""
    ^(?:\d{6}\ [ \d]\d:\d\d:\d\d\t | \t\t)   # time, or none
    \ *(?P<id>\d{1,20})\                      # connection id
    (?P<rest>[A-Z].*)$                        # command, tab, argument
    """,
    re.VERBOSE | re.DOTALL,
)
# The start banner: three lines at the head of every general log file.
_BANNER_LINES = 3
# What a load client does; a connection doing anything else (the recording's setup and teardown:
# CREATE/DROP SCHEMA, switching logging off) is not replayed: in rounds it would drop a schema
# every few minutes, or open a "logging off" gap in a log that goes on.
_LOAD_STATEMENTS = (b"SELECT", b"INSERT")
RECORDS_PER_TICK = 4
TICK_SECONDS = 2.0


@dataclass(frozen=True)
class Record:
    connection_id: int
    rest: bytes  # command, tab, argument, and any continuation lines of a multi-line statement


def read_sample(path: Path) -> tuple[list[bytes], list[Record]]:
    """The banner lines and the load clients' records of a general log file, in order: those of
    connections that log in within the file and only read and insert."""
    lines = path.read_bytes().splitlines(keepends=True)
    banner, body = lines[:_BANNER_LINES], lines[_BANNER_LINES:]
    records: list[Record] = []
    for line in body:
        match = _RECORD.match(line)
        if match:
            records.append(Record(int(match["id"]), match["rest"]))
        elif records and line not in banner:
            # A statement's next line (a multi-line statement) belongs to the record before it.
            last = records[-1]
            records[-1] = Record(last.connection_id, last.rest + line)
    connected = {r.connection_id for r in records if r.rest.startswith(b"Connect\t")}
    other = {
        r.connection_id
        for r in records
        if r.rest.startswith(b"Query\t") and not r.rest[6:].lstrip().upper().startswith(_LOAD_STATEMENTS)
    }
    return banner, [r for r in records if r.connection_id in connected - other]


def highest_id(path: Path, tail: int = 1 << 20) -> int:
    """The highest connection id in the last MiB of a log written before (0 when there is none),
    so that a demo started again goes on numbering where the last one stopped."""
    try:
        with path.open("rb") as log:
            log.seek(max(0, log.seek(0, 2) - tail))
            lines = log.read().splitlines()
    except FileNotFoundError:
        return 0
    found = (_RECORD.match(line) for line in lines)
    return max((int(match["id"]) for match in found if match), default=0)


def rounds(records: list[Record], after: int = 0) -> Iterator[Record]:
    """The records again and again, each round's connection ids above the last round's (and the
    first round's above `after`)."""
    step = max((r.connection_id for r in records), default=0) + 1
    shift = after
    while records:
        for record in records:
            yield Record(record.connection_id + shift, record.rest)
        shift += step


def stamp(now: datetime) -> bytes:
    """MariaDB's general log time: `261124 20:14:29` (two-digit year, hour padded with a space)."""
    return f"{now:%y%m%d} {now.hour:2d}:{now:%M:%S}".encode()


def line_of(record: Record, now: datetime, last_second: datetime | None) -> bytes:
    second = now.replace(microsecond=0)
    head = stamp(second) + b"\t" if second != last_second else b"\t\t"
    text = head + f"{record.connection_id:6d} ".encode() + record.rest
    return text if text.endswith(b"\n") else text + b"\n"


def feed(
    sample: Path,
    target: Path,
    *,
    per_tick: int = RECORDS_PER_TICK,
    tick: float = TICK_SECONDS,
    ticks: int | None = None,
) -> None:
    """Append `per_tick` records every `tick` seconds, `ticks` times or until stopped; a new
    file gets the sample's banner first."""
    banner, records = read_sample(sample)
    if not records:
        raise SystemExit(f"{sample}: no records to replay")
    target.parent.mkdir(parents=True, exist_ok=True)
    source = rounds(records, after=highest_id(target))
    last_second: datetime | None = None
    with target.open("ab") as out:
        if out.tell() == 0:
            out.write(b"".join(banner))
        done = 0
        while ticks is None or done < ticks:
            done += 1
            now = datetime.now(UTC)
            for _ in range(per_tick):
                out.write(line_of(next(source), now, last_second))
                last_second = now.replace(microsecond=0)
            out.flush()
            time.sleep(tick)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m devtools.demofeed SAMPLE_GENERAL_LOG TARGET", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    with contextlib.suppress(KeyboardInterrupt):
        feed(Path(argv[0]), Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
