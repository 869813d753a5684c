"""Benchmark: what attribution provenance costs the parsing process, against a baseline commit.

    .venv/bin/python bench/attribution_bench.py [--log bench/out/slap-general.log] [--base 0101024]
        [--rounds 5] [--queries 200000] [--ingest 3]

Makes the benchmark log first when it is missing (bench/genlog_bench.py's mariadb-slap log, 200,000
queries against the local MariaDB). Checks the baseline commit out into a scratch work tree, then
runs the parsing side of an ingest (parser, session tracker, classifier, gap finder and COPY
formatting: what the forked parsing process does, no database) over the log in this checkout and in
the baseline, alternately, `--rounds` times each, each in a fresh process. It reports the CPU
seconds of that process (time.process_time, which other load disturbs less than wall time), the
minimum of the rounds for each, and the ratio. Writes bench/out/attribution.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
PG = "postgres://postgres@127.0.0.1:5432"  # a server where scratch databases may be made

# Run inside a checkout (its directory first on sys.path): the parsing side, timed.
PROBE = """
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")
os.environ.setdefault("DEBUG", "true")
import django
django.setup()
from zoneinfo import ZoneInfo
from ingest.events import EventRecord
from ingest.normalize import GapFinder, SessionTracker, classify_events
from ingest.parsers import general_log
from ingest.parsers.records import Hints
from ingest.tail import open_log
from ingest.rows import RowFormatter
opened = open_log(__import__("pathlib").Path(sys.argv[1]))
tracker = SessionTracker("bench", ZoneInfo("UTC"))
formatter = RowFormatter(source_file_id=1, ingest_run_id=1)
start = time.process_time()
batch, n = [], 0
for item in GapFinder().process(classify_events(tracker.process(
        general_log.parse(opened.lines, hints=Hints(mtime_year=2026))), tracker.routines)):
    if isinstance(item, EventRecord):
        batch.append(item)
        if len(batch) == 5000:
            formatter.format(batch)
            n += len(batch)
            batch = []
formatter.format(batch)
n += len(batch)
print(time.process_time() - start, n)
"""


def probe(checkout: Path, log: Path) -> tuple[float, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(log)], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), int(out[1])


def ingest(checkout: Path, log: Path, database: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this command and its parsing process) of `manage.py ingest` of
    the log into a fresh database, migrated first (not timed)."""
    import os
    import resource
    import time

    url = f"{PG}/{database}"
    admin = ["psql", f"{PG}/postgres", "-X", "-q", "-c"]
    subprocess.run([*admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"], check=True)
    subprocess.run([*admin, f"CREATE DATABASE {database}"], check=True)
    env = dict(os.environ, DATABASE_URL=url, SECRET_KEY="bench", DEBUG="false")
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=checkout, env=env, check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run([*manage, "ingest", str(log), "--server", "bench"], cwd=checkout, env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    subprocess.run([*admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"], check=True)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--log", type=Path, default=OUT / "slap-general.log")
    parser.add_argument("--base", default="0101024", help="the commit before attribution provenance")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--queries", type=int, default=200_000, help="of the mariadb-slap load, without --log"
    )
    parser.add_argument("--ingest", type=int, default=0, help="also time this many whole `ingest` runs each")
    args = parser.parse_args()
    if not args.log.exists():
        sys.path.insert(0, str(REPO / "bench"))
        import genlog_bench

        args.log = genlog_bench.make_log(args.queries, 50)
    with tempfile.TemporaryDirectory(prefix="auditweb-base-") as scratch:
        base = Path(scratch) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=REPO, check=True)
        try:
            times: dict[str, list[float]] = {"base": [], "now": []}
            events: dict[str, int] = {}
            for _ in range(args.rounds):
                for name, checkout in (("base", base), ("now", REPO)):
                    seconds, n = probe(checkout, args.log.resolve())
                    times[name].append(seconds)
                    events[name] = n
            whole: dict[str, list[tuple[float, float]]] = {"base": [], "now": []}
            for _ in range(args.ingest):
                for name, checkout in (("base", base), ("now", REPO)):
                    whole[name].append(ingest(checkout, args.log.resolve(), f"auditweb_bench_{name}"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=True)
    best = {name: min(values) for name, values in times.items()}
    result = {
        "log": str(args.log),
        "base": args.base,
        "cpu_seconds": times,
        "min_cpu_seconds": best,
        "events": events,
        "events_per_cpu_second": {name: events[name] / best[name] for name in best},
        "cost": best["now"] / best["base"] - 1,
        "ingest_wall_and_cpu_seconds": whole,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "attribution.json").write_text(json.dumps(result, indent=2))
    print(f"| checkout | events | min CPU s of {args.rounds} | events per CPU s |")
    print("| --- | --- | --- | --- |")
    for name in ("base", "now"):
        print(f"| {name} | {events[name]:,} | {best[name]:.3f} | {events[name] / best[name]:,.0f} |")
    print(f"attribution costs {100 * result['cost']:+.1f}% of the parsing process's CPU time")
    if args.ingest:
        print(
            f"| checkout | min wall s of {args.ingest} `ingest` | events/s | min CPU s (command + parser) |"
        )
        print("| --- | --- | --- | --- |")
        for name in ("base", "now"):
            wall, cpu = min(w for w, _ in whole[name]), min(c for _, c in whole[name])
            print(f"| {name} | {wall:.2f} | {events[name] / wall:,.0f} | {cpu:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
