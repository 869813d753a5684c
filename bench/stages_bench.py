"""Benchmark: CPU time per event of each stage of the parsing process, per file format.

    .venv/bin/python bench/stages_bench.py [--log bench/out/slap-general.log] [--mb 40]

Writes each format's file from the real mariadb-slap log as bench/formats_bench.py does, then
runs the parsing side of an ingest (what the forked process does, no database) four times
over it, each time one stage further: parse; + session tracking; + classification (with
transactions and gaps); + COPY formatting. CPU time of this process (time.process_time), so
other load on the machine disturbs it less than wall time would. The difference between
two columns is what a stage costs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django  # noqa: E402

django.setup()

import formats_bench  # noqa: E402

from ingest.events import EventRecord  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker, classify_events  # noqa: E402
from ingest.parsers import by_name  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402
from ingest.rows import RowFormatter  # noqa: E402
from ingest.tail import open_log  # noqa: E402

STAGES = ("parse", "+ sessions", "+ classify", "+ format")


def stage_items(fmt: str, path: Path, stage: int) -> Iterator[object]:
    opened = open_log(path)
    tracker = SessionTracker("bench", ZoneInfo("UTC"))
    items: Iterator[object] = by_name(fmt).parse(opened.lines, hints=Hints(mtime_year=2026))
    if stage >= 1:
        items = tracker.process(items)  # type: ignore[arg-type]  # one variable for every stage's output
    if stage >= 2:
        items = GapFinder().process(classify_events(items, tracker.routines))  # type: ignore[arg-type]  # as above
    return items


def run(fmt: str, path: Path, stage: int) -> tuple[int, float]:
    """(events, CPU seconds) of the parsing side up to `stage` (an index of STAGES)."""
    start = time.process_time()
    count = 0
    if stage < 3:
        for _ in stage_items(fmt, path, stage):
            count += 1
        return count, time.process_time() - start
    formatter = RowFormatter(source_file_id=1, ingest_run_id=1)
    batch: list[EventRecord] = []
    for item in stage_items(fmt, path, stage):
        if isinstance(item, EventRecord):
            batch.append(item)
            if len(batch) >= 20_000:
                formatter.format(batch)
                count += len(batch)
                batch = []
    formatter.format(batch)
    count += len(batch)
    return count, time.process_time() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, default=formats_bench.OUT / "slap-general.log")
    ap.add_argument("--mb", type=int, default=40)
    ap.add_argument("--formats", nargs="*", default=list(formats_bench.FORMATS))
    args = ap.parse_args()
    if not args.log.exists():
        print(f"{args.log} is missing: run bench/genlog_bench.py first (it makes the log)", file=sys.stderr)
        return 1
    rows = formats_bench.events(args.log)
    print("| format | " + " | ".join(STAGES) + " |")
    print("| --- |" + " --- |" * len(STAGES))
    for fmt in args.formats:
        path = formats_bench.OUT / f"stages-{fmt}.log"
        formats_bench.write(path, fmt, rows, args.mb << 20)
        cells = []
        for stage in range(len(STAGES)):
            events, seconds = run(fmt, path, stage)
            cells.append(f"{seconds / events * 1e6:.1f} us")
        path.unlink()
        print(f"| {fmt} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
