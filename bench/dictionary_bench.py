"""Benchmark: what the statement dictionary (issue 22) saves on a log, without a database.

    .venv/bin/python bench/dictionary_bench.py [--format general-log] PATH...

Each log goes through the parsing process's stages (parser, session tracker, classifier, gap
finder) and RowFormatter, as `manage.py ingest` runs them; then per log: events, distinct
statements (the dictionary's rows), events per statement, and the COPY text bytes per event of
the wide row of before (every column) against the narrow row plus the dictionary's rows (each
distinct statement's values counted once). COPY text is what PostgreSQL reads; its bytes on disk
are measured by bench/compare_trees.py (pg_total_relation_size).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django

django.setup()

from ingest.events import EventRecord  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker, classifier_for  # noqa: E402
from ingest.parsers import by_name, dialect_of  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402
from ingest.rows import RowFormatter  # noqa: E402
from ingest.tail import open_log  # noqa: E402

BATCH = 20_000


def measure(path: Path, fmt: str) -> tuple[int, int, int, int]:
    """Events, distinct statements, wide COPY bytes, narrow COPY bytes plus the statements'."""
    opened = open_log(path)
    dialect = dialect_of(fmt)
    tracker = SessionTracker("bench", ZoneInfo("UTC"))
    tracker.dialect = dialect
    records = by_name(fmt).parse(opened.lines, hints=Hints(mtime_year=2026))
    classify = classifier_for(dialect)
    items = GapFinder(dialect=dialect).process(classify(tracker.process(records), tracker.routines))
    formatter = RowFormatter(source_file_id=1, ingest_run_id=1)
    statements: dict[bytes, int] = {}
    events = wide = narrow = 0
    batch: list[EventRecord] = []

    def flush() -> None:
        nonlocal events, wide, narrow
        formatted = formatter.format(batch)
        events += formatted.count
        wide += len(getattr(formatted, "copy", b""))  # (no wide line since custody links of version 3)
        narrow += len(formatted.narrow)
        for row in formatted.statements:
            # The dictionary row's COPY text, about: id, key, the values, tabs and a newline.
            size = 20 + 35 + sum(len(str(v).encode()) for v in (row[2], row[3], row[5], row[6], row[7]))
            statements.setdefault(row[1], size + sum(len(t) + 3 for t in row[4]) + 8)
        batch.clear()

    for item in items:
        if isinstance(item, EventRecord):
            batch.append(item)
            if len(batch) >= BATCH:
                flush()
    flush()
    return events, len(statements), wide, narrow + sum(statements.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--format", default="general-log")
    args = parser.parse_args()
    print("| log | events | statements | events per statement | wide COPY B/event", end="")
    print(" | narrow + dictionary B/event |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for path in args.paths:
        events, distinct, wide, narrow = measure(path, args.format)
        if not events:
            print(f"| {path.name} | 0 | | | | |")
            continue
        wide_text = f"{wide / events:.0f}" if wide else "-"
        print(
            f"| {path.name} | {events:,} | {distinct:,} | {events / distinct:.1f} | {wide_text}"
            f" | {narrow / events:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
