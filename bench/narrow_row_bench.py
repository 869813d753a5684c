"""Benchmark: what the parsing process's COPY formatting costs today, and with a narrow row.

    .venv/bin/python bench/narrow_row_bench.py [--log bench/out/slap-general.log] [--runs 5]

Issue 22 (item 1) replaces the 25-column event row with a narrow one that refers to a
statement dictionary. This measures, on the events of a real log (parsed, attributed and
classified once, untimed), the CPU seconds of turning them into COPY text and pickling each
batch for the pipe:

- today: `ingest.rows.RowFormatter` (the row the store writes now);
- narrow: a prototype of the row the issue describes (time, session id, statement id, command,
  per-event flags, status, rows, source file, line, offset, length), each distinct statement
  (text, database: its classification) formatted once, the first time a batch holds it, as a
  row of its own for the dictionary. Not the store's code: a measure for the part that writes it.

CPU time of this process (time.process_time), the minimum of `--runs`; COPY bytes per event, and
the statements the dictionary holds.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, os.getcwd())  # the checkout measured is the one this is run from
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django

django.setup()

from ingest.events import EventRecord, session_id_of  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker, classify_events  # noqa: E402
from ingest.parsers import by_name  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402
from ingest.rows import NULL, RowFormatter, _copy_array, _copy_text  # noqa: E402
from ingest.tail import open_log  # noqa: E402

BATCH = 20_000  # INGEST_BATCH_SIZE's default
# The command names as small numbers (a narrow row stores a code, not the name).
COMMANDS: dict[str, int] = {}


class NarrowFormatter:
    """The prototype: a statement dictionary (one id a distinct text and database) and a row of
    eleven short columns an event."""

    def __init__(self, source_file_id: int) -> None:
        self.file = str(source_file_id)
        self.statements: dict[tuple[str, str | None], str] = {}
        self.session_ids: dict[str, str] = {}
        self.flag_texts: dict[frozenset[str], str] = {}
        self.last_time: object = None
        self.last_iso = ""

    def format(self, events: Sequence[EventRecord]) -> tuple[bytes, bytes]:
        """(event rows, new statement rows) as COPY text."""
        rows: list[str] = []
        new: list[str] = []
        statements, sessions, flag_texts = self.statements, self.session_ids, self.flag_texts
        for e in events:
            key = (e.sql, e.database)
            sid = statements.get(key)
            if sid is None:
                sid = statements[key] = str(len(statements) + 1)
                destructive = "t" if e.destructive else "f"
                new.append(
                    f"{sid}\t{_copy_text(e.sql)}\t{_copy_text(e.database)}\t{_copy_text(e.fingerprint)}"
                    f"\t{_copy_text(e.statement_type)}\t{_copy_array(e.tables)}\t{destructive}\n"
                )
            occurred = e.occurred_at
            if occurred is None:
                when = NULL
            elif occurred is self.last_time:
                when = self.last_iso
            else:
                when = self.last_iso = occurred.isoformat()
                self.last_time = occurred
            session = sessions.get(e.session.key)
            if session is None:
                session = sessions[e.session.key] = str(session_id_of(e.session.key))
            flags = frozenset(e.flags)
            flag_text = flag_texts.get(flags)
            if flag_text is None:
                flag_text = flag_texts[flags] = _copy_array(sorted(flags))
            command = COMMANDS.setdefault(e.command, len(COMMANDS) + 1)
            rows.append(
                f"{when}\t{session}\t{sid}\t{command}\t{flag_text}\t{NULL if e.status is None else e.status}"
                f"\t{NULL if e.rows_affected is None else e.rows_affected}\t{self.file}\t{e.line}"
                f"\t{e.offset}\t{len(e.raw)}\n"
            )
        return "".join(rows).encode(), "".join(new).encode()


def events_of(path: Path) -> list[EventRecord]:
    opened = open_log(path)
    tracker = SessionTracker("bench", ZoneInfo("UTC"))
    items = by_name("general-log").parse(opened.lines, hints=Hints(mtime_year=2026))
    out = GapFinder().process(classify_events(tracker.process(items), tracker.routines))  # type: ignore[arg-type]  # parser items
    return [e for e in out if isinstance(e, EventRecord)]


def today(events: list[EventRecord]) -> tuple[float, int]:
    start = time.process_time()
    formatter = RowFormatter(source_file_id=1, ingest_run_id=1)
    size = 0
    for i in range(0, len(events), BATCH):
        batch = formatter.format(events[i : i + BATCH])
        size += len(getattr(batch, "copy", None) or batch.narrow)  # (the narrow row only, since custody v3)
        pickle.dumps(("item", batch), pickle.HIGHEST_PROTOCOL)
    return time.process_time() - start, size


def narrow(events: list[EventRecord]) -> tuple[float, int, int]:
    start = time.process_time()
    formatter = NarrowFormatter(1)
    size = 0
    for i in range(0, len(events), BATCH):
        rows, statements = formatter.format(events[i : i + BATCH])
        size += len(rows) + len(statements)
        pickle.dumps(("item", (rows, statements)), pickle.HIGHEST_PROTOCOL)
    return time.process_time() - start, size, len(formatter.statements)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, default=Path(__file__).resolve().parent / "out" / "slap-general.log")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    events = events_of(args.log)
    best_today = best_narrow = float("inf")
    size_today = size_narrow = statements = 0
    for _ in range(args.runs):
        seconds, size_today = today(events)
        best_today = min(best_today, seconds)
        seconds, size_narrow, statements = narrow(events)
        best_narrow = min(best_narrow, seconds)
    n = max(len(events), 1)
    print(f"{args.log}: {len(events):,} events, {statements:,} distinct statements (text, database)")
    print("| row | format + pickle, CPU s | µs an event | COPY bytes an event |")
    print("| --- | --- | --- | --- |")
    print(f"| today (RowFormatter) | {best_today:.3f} | {best_today / n * 1e6:.1f} | {size_today / n:.0f} |")
    print(f"| narrow (prototype) | {best_narrow:.3f} | {best_narrow / n * 1e6:.1f} | {size_narrow / n:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
