"""Benchmark: CPU time per event of each stage of the parsing process, per file format.

    .venv/bin/python bench/stages_bench.py [--log bench/out/slap-general.log] [--mb 40] [--runs 1]
        [--out DIR] [--formats ...]

Another checkout's code is measured with the environment variable BENCH_TREE=/path/to/checkout
(its ingest modules are imported instead of this one's; the files are written the same way).

Writes each format's file from the real mariadb-slap log as bench/formats_bench.py does, then
runs the parsing side of an ingest (what the forked process does, no database) four times
over it, each time one stage further: parse; + session tracking; + classification (with
transactions and gaps); + COPY formatting. CPU time of this process (time.process_time), so
other load on the machine disturbs it less than wall time would. The difference between
two columns is what a stage costs. With --runs N each stage runs N times and the least CPU
time is kept (the least disturbed run).
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
# The code measured: this checkout's, or the one BENCH_TREE names (a "before" beside the "after").
TREE = Path(os.environ.get("BENCH_TREE") or REPO).resolve()
sys.path.insert(0, str(TREE))
CALLED_FROM = Path.cwd()
os.chdir(TREE)  # (Django's set-up puts the working directory first on the path: the tree's, then)
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
    ap.add_argument("--runs", type=int, default=1, help="runs of each stage; the least CPU time is kept")
    ap.add_argument("--out", type=Path, default=formats_bench.OUT, help="where the files are written")
    ap.add_argument("--keep", action="store_true", help="keep the files, and use those already there")
    ap.add_argument("--stages", type=int, default=len(STAGES), help="how many stages, from the parse on")
    args = ap.parse_args()
    args.log, args.out = CALLED_FROM / args.log, CALLED_FROM / args.out
    if not args.log.exists():
        print(f"{args.log} is missing: run bench/genlog_bench.py first (it makes the log)", file=sys.stderr)
        return 1
    rows = None
    print(f"code: {TREE} ({sys.modules['ingest'].__file__})")
    print("| format | " + " | ".join(STAGES[: args.stages]) + " |")
    print("| --- |" + " --- |" * args.stages)
    for fmt in args.formats:
        path = args.out / f"stages-{fmt}.log"
        if not (args.keep and path.exists()):
            rows = rows or formats_bench.events(args.log)
            formats_bench.write(path, fmt, rows, args.mb << 20)
        cells = []
        for stage in range(args.stages):
            events, seconds = min((run(fmt, path, stage) for _ in range(args.runs)), key=lambda r: r[1])
            cells.append(f"{seconds / events * 1e6:.1f} us")
        if not args.keep:
            path.unlink()
        print(f"| {fmt} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
