"""Benchmark: the narrow row as binary COPY against text COPY, end to end (issue 22, item 3).

    DATABASE_URL=... .venv/bin/python bench/binary_copy_bench.py [--log bench/out/slap-general.log] [--runs 3]

The events of a general log (parsed, attributed and classified once, untimed) are formatted by
`ingest.rows.RowFormatter` (text COPY, what the store sends) and by a prototype of the same narrow
row in PostgreSQL's binary COPY format (below: each repeating group of columns packed once and
looked up, as RowFormatter does; the record hash made the same way). Measured, the minimum of
`--runs`, alternating text and binary:

- formatting: CPU seconds of this process (time.process_time), per batch of 20,000, pickled as
  for the pipe;
- PostgreSQL: CPU seconds of the backend that runs the COPY (utime + stime of its
  /proc/PID/stat: the database must run on this machine), copying every batch into a table made
  `LIKE ingest_event_row INCLUDING ALL` (its columns, defaults and indexes, not partitioned),
  emptied before each run; and the bytes sent.

Writes nothing but that table (`bench_binary_copy`, dropped at the end) in the database of
DATABASE_URL. The prototype is not the store's code.
"""

from __future__ import annotations

import argparse
import os
import pickle
import struct
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, os.getcwd())  # the checkout measured is the one this is run from
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django

django.setup()

from django.db import connection  # noqa: E402

from ingest.chunks import ContentWindow  # noqa: E402
from ingest.events import EventRecord, session_id_of  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker, classify_events  # noqa: E402
from ingest.parsers import by_name  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402
from ingest.rows import ROW_COLUMNS, RowFormatter  # noqa: E402
from ingest.tail import FileLines, open_log  # noqa: E402

BATCH = 20_000
TABLE = "bench_binary_copy"
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's timestamps count from here
HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)
NULL = struct.pack(">i", -1)
_INT8 = struct.Struct(">iq")
_INT4 = struct.Struct(">ii")


def _text(value: str | None) -> bytes:
    if value is None:
        return NULL
    data = value.encode()
    return struct.pack(">i", len(data)) + data


def _int8(value: int | None) -> bytes:
    return NULL if value is None else _INT8.pack(8, value)


def _array(items: list[str], element_oid: int) -> bytes:
    """A one-dimensional array of text-like elements, binary."""
    if not items:
        body = struct.pack(">iii", 0, 0, element_oid)
    else:
        body = struct.pack(">iiiii", 1, 0, element_oid, len(items), 1) + b"".join(_text(i) for i in items)
    return struct.pack(">i", len(body)) + body


class BinaryFormatter:
    """The narrow row (ROW_COLUMNS, the same values as RowFormatter's) in binary COPY format."""

    def __init__(self, varchar_oid: int) -> None:
        self.oid = varchar_oid
        self.who: dict[tuple[object, ...], bytes] = {}
        self.statements: dict[tuple[object, ...], tuple[bytes, bytes]] = {}
        self.flags: dict[frozenset[str], bytes] = {}
        self.sessions: dict[str, bytes] = {}
        self.times: dict[object, tuple[bytes, object]] = {}

    def format(self, events: list[EventRecord]) -> bytes:
        import hashlib  # (only this prototype needs it)

        out = [HEADER]
        append = out.append
        count = struct.pack(">h", len(ROW_COLUMNS))
        last_time: object = self  # (no event's time: the first always makes its head)
        when = b""
        head: object = None
        for e in events:
            occurred = e.occurred_at
            if occurred is not last_time:
                last_time = occurred
                if occurred is None:
                    when, text = NULL, "-"
                else:
                    delta = occurred - EPOCH
                    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
                    when, text = _INT8.pack(8, micros), occurred.isoformat()
                head = hashlib.blake2b(f"{e.server}\x00{text}\x00".encode(), digest_size=16)
            digest = head.copy()  # type: ignore[attr-defined]  # a blake2b object
            digest.update(b"%d\x00%s" % (e.offset, e.raw))
            key = (e.server, e.connection_id, e.user, e.host, e.ip, e.command)
            who = self.who.get(key)
            if who is None:
                who = _text(e.server) + _int8(e.connection_id) + _text(e.user) + _text(e.host)
                who = self.who[key] = who + _text(e.ip) + _text(e.command)
            values = (e.statement_type, e.tables, e.destructive, e.sql, e.database, e.fingerprint)
            statement = self.statements.get(values)
            if statement is None:  # its columns on the row, and an id (any 64-bit number here)
                columns = _text(e.statement_type) + _array(list(e.tables), self.oid)
                columns += struct.pack(">ib", 1, 1 if e.destructive else 0)
                statement = self.statements[values] = (columns, _int8(hash(values)))
            flags = frozenset(e.flags)
            flag_field = self.flags.get(flags)
            if flag_field is None:
                flag_field = self.flags[flags] = _array(sorted(flags), self.oid)
            session = self.sessions.get(e.session.key)
            if session is None:
                session = self.sessions[e.session.key] = (
                    _int8(1) + _int8(session_id_of(e.session.key)) + _int8(1) + _text(e.attribution)
                )
            append(
                b"%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s"
                % (
                    count,
                    when,
                    who,
                    statement[0],
                    flag_field,
                    _int8(e.rows_affected),
                    _text(e.status),
                    NULL,  # raw: a slice of the chunks (as nearly every event of a file)
                    _INT8.pack(8, e.line),
                    _INT8.pack(8, e.offset),
                    b"\x00\x00\x00\x10" + digest.digest(),
                    session,
                    _text(e.definer),
                    _INT4.pack(4, len(e.raw)),
                    statement[1],
                )
            )
        out.append(TRAILER)
        return b"".join(out)


def events_of(path: Path) -> tuple[list[EventRecord], list[tuple[int, bytes]]]:
    opened = open_log(path)
    window = ContentWindow()
    lines = FileLines(opened.lines, 0, 1, None, partial_ok=True)
    lines.window = window
    tracker = SessionTracker("bench", ZoneInfo("UTC"))
    items = by_name("general-log").parse(lines, hints=Hints(mtime_year=2026))
    out = GapFinder().process(classify_events(tracker.process(items), tracker.routines))  # type: ignore[arg-type]  # parser items
    return [e for e in out if isinstance(e, EventRecord)], window.runs()


def backend_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, default=Path(__file__).resolve().parent / "out" / "slap-general.log")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    events, runs = events_of(args.log)
    columns = ", ".join(f'"{c}"' for c in ROW_COLUMNS)
    with connection.cursor() as cur:
        cur.execute("SELECT 'varchar'::regtype::oid, pg_backend_pid()")
        oid, pid = cur.fetchone()
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.execute(f"CREATE TABLE {TABLE} (LIKE ingest_event_row INCLUDING ALL)")
    best: dict[str, list[float]] = {"text": [1e9, 1e9, 0], "binary": [1e9, 1e9, 0]}
    try:
        for _ in range(args.runs):
            for kind in ("text", "binary"):
                start = time.process_time()
                buffers = []
                if kind == "text":
                    formatter = RowFormatter(source_file_id=1, ingest_run_id=1)
                    window = formatter.window = ContentWindow()
                    window._runs = [(s, [d]) for s, d in runs]  # the content, as the read kept it
                    for i in range(0, len(events), BATCH):
                        batch = formatter.format(events[i : i + BATCH])
                        pickle.dumps(("item", batch), pickle.HIGHEST_PROTOCOL)
                        buffers.append(batch.narrow)
                else:
                    binary = BinaryFormatter(oid)
                    for i in range(0, len(events), BATCH):
                        data = binary.format(events[i : i + BATCH])
                        pickle.dumps(("item", data), pickle.HIGHEST_PROTOCOL)
                        buffers.append(data)
                formatting = time.process_time() - start
                with connection.cursor() as cur:
                    cur.execute(f"TRUNCATE {TABLE}")
                raw = connection.connection.cursor()
                before = backend_cpu(pid)
                option = " WITH (FORMAT binary)" if kind == "binary" else ""
                for data in buffers:
                    with raw.copy(f"COPY {TABLE} ({columns}) FROM STDIN{option}") as copy:
                        copy.write(data)
                postgres = backend_cpu(pid) - before
                best[kind][0] = min(best[kind][0], formatting)
                best[kind][1] = min(best[kind][1], postgres)
                best[kind][2] = sum(map(len, buffers))
    finally:
        with connection.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
    print(f"{len(events):,} events of {args.log}, min of {args.runs}")
    print("| COPY | formatting CPU s | PostgreSQL backend CPU s | sum | bytes an event |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind, (formatting, postgres, size) in best.items():
        total = formatting + postgres
        print(f"| {kind} | {formatting:.3f} | {postgres:.3f} | {total:.3f} | {size / len(events):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
