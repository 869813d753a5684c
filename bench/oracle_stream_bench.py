"""Benchmark: Oracle SQLcl exports (CSV, JSON) parsed in flat memory, at 50 and 100 MB.

    .venv/bin/python bench/oracle_stream_bench.py [--mb 100] [--runs 3]

The exports are tests/fixtures/oracle-csv/unified-scene.csv and oracle-json/unified-scene.json:
their rows repeated (ENTRY_ID moved on per copy) until each file holds --mb MB (and half
that), written to bench/out/ (gitignored). Each file is read by its parser
(ingest.parsers.oracle_csv, oracle_json: no Django, no database) through the same bounded
line reader as `manage.py ingest` (ingest.tail.open_log), --runs times, each in a fresh child
process; the minimum of CPU seconds and of peak resident memory is kept. Memory flat in the
file's size is what the issue asks: the 100 MB file must not take more than the 50 MB one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out"
FIXTURES = REPO / "tests" / "fixtures"
_ENTRY_CSV = re.compile(rb'^("Standard",\d+,(?:[^,]*,){9})(\d+),', re.M)  # ENTRY_ID: the 12th column
_ENTRY_JSON = re.compile(rb'"entry_id":(\d+)')


def make_csv(path: Path, megabytes: int) -> int:
    """The CSV export: its header once, then its rows again and again, to `megabytes` MB."""
    header, rows = (FIXTURES / "oracle-csv" / "unified-scene.csv").read_bytes().split(b"\n", 1)
    rows = rows.rstrip(b"\n") + b"\n"
    size = len(header) + 1
    with path.open("wb") as f:
        f.write(header + b"\n")
        copy = 0
        while size < megabytes << 20:
            copy += 1
            shifted = _ENTRY_CSV.sub(lambda m, n=copy: m[1] + b"%d," % (int(m[2]) + n * 1000), rows)
            f.write(shifted)
            size += len(shifted)
    return size


def make_json(path: Path, megabytes: int) -> int:
    """The JSON export: its head once, its rows (one a line) again and again, `]}]}` to end."""
    data = (FIXTURES / "oracle-json" / "unified-scene.json").read_bytes()
    start = data.index(b"[\n", data.index(b'"items":')) + 2
    end = data.rindex(b"\n]}]}")
    head, rows = data[:start], data[start:end].rstrip(b"\n")
    size = len(head)
    with path.open("wb") as f:
        f.write(head)
        copy = 0
        while size < megabytes << 20:
            copy += 1
            shifted = _ENTRY_JSON.sub(lambda m, n=copy: b'"entry_id":%d' % (int(m[1]) + n * 1000), rows)
            piece = (b",\n" if copy > 1 else b"") + shifted
            f.write(piece)
            size += len(piece)
        f.write(b"\n]}]}\n")
    return size + 6


def parse_child(fmt: str, path: str) -> dict[str, object]:
    """The parser alone, in this (fresh) process, reading as `manage.py ingest` does."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    os.environ.setdefault("SECRET_KEY", "bench")
    import django

    django.setup()
    from ingest.parsers import by_name
    from ingest.parsers.records import Hints, LogRecord, Problem
    from ingest.tail import open_log

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    started, cpu = time.perf_counter(), time.process_time()
    events = problems = 0
    for item in by_name(fmt).parse(open_log(Path(path)).lines, hints=Hints()):
        if isinstance(item, LogRecord):
            events += 1
        elif isinstance(item, Problem):
            problems += 1
    return {
        "events": events,
        "problems": problems,
        "cpu_s": time.process_time() - cpu,
        "wall_s": time.perf_counter() - started,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "peak_before_mib": before,
    }


def _child(fmt: str, path: Path) -> dict[str, object]:
    run = subprocess.run(
        [sys.executable, __file__, "--child", fmt, str(path)], capture_output=True, text=True, cwd=REPO
    )
    if run.returncode != 0:
        raise RuntimeError(f"the {fmt} run failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("FORMAT", "PATH"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(parse_child(*args.child)))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for fmt, make in (("oracle-csv", make_csv), ("oracle-json", make_json)):
        for mb in (args.mb // 2, args.mb):
            path = OUT / f"{fmt}-{mb}mb"
            size = make(path, mb)
            runs = [_child(fmt, path) for _ in range(args.runs)]
            best = {
                k: min(r[k] for r in runs) if isinstance(runs[0][k], float | int) else runs[0][k]
                for k in runs[0]
            }
            best["events"], best["problems"] = runs[0]["events"], runs[0]["problems"]
            results.append({"format": fmt, "mb": round(size / (1 << 20), 1), **best})
            path.unlink()
            print(json.dumps(results[-1]), flush=True)
    facts = {"cores": os.cpu_count(), "python": platform.python_version(), "load_average": os.getloadavg()}
    print(json.dumps(facts))
    print("| format | file MB | events | problems | CPU s (events/s) | peak RSS MiB (before reading) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        rate = r["events"] / r["cpu_s"] if r["cpu_s"] else 0
        print(
            f"| {r['format']} | {r['mb']} | {r['events']:,} | {r['problems']} | {r['cpu_s']:.1f}"
            f" ({rate:,.0f}) | {r['peak_mib']} ({r['peak_before_mib']}) |"
        )
    (OUT / "oracle_stream.json").write_text(
        json.dumps({"machine": facts, "results": results}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
