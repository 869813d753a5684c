"""Benchmark: the pgAudit csvlog parser on a ~100 MB file, events/s and peak memory.

    .venv/bin/python bench/pgaudit_bench.py [--mb 100]

The traffic is real: the csvlog of tests/fixtures/pgaudit_scene (a private PostgreSQL 15 with
pgAudit 1.7), its session ids renumbered per copy (so that each copy's sessions are new ones,
as on a server) and repeated until the file holds --mb MB, written to bench/out/. The file is
parsed twice in a child process each time, whole and at half the size: the child's peak
resident memory (ru_maxrss) should not grow with the file. Parsing only: no database.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out"
SAMPLE = REPO / "tests" / "fixtures" / "pgaudit_scene"
_SESSION_RE = re.compile(rb",([0-9a-f]{8})\.([0-9a-f]{1,8}),")


def make(path: Path, megabytes: int) -> int:
    """Write the sample's csvlog again and again (session ids moved on per copy); its size."""
    truth = json.loads((SAMPLE / "truth.json").read_text())
    data = b"".join((SAMPLE / name).read_bytes() for name in truth["files"]["csv"])
    size = 0
    with path.open("wb") as f:
        copy = 0
        while size < megabytes << 20:
            copy += 1
            shifted = _SESSION_RE.sub(
                lambda m, n=copy: b",%s.%x," % (m[1], (int(m[2], 16) + n * 4096) % (1 << 22)), data
            )
            f.write(shifted)
            size += len(shifted)
    return size


def child(path: str) -> None:
    from ingest.parsers import pgaudit_csv
    from ingest.parsers.records import LogRecord

    started = time.perf_counter()
    events = problems = 0
    with open(path, "rb") as f:
        for item in pgaudit_csv.parse(f):
            if isinstance(item, LogRecord):
                events += 1
            else:
                problems += type(item).__name__ == "Problem"
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps({"events": events, "problems": problems, "seconds": seconds, "peak_mib": peak}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for mb in (args.mb // 2, args.mb):
        path = OUT / f"pgaudit-{mb}mb.csv"
        size = make(path, mb)
        run = subprocess.run(
            [sys.executable, __file__, "--child", str(path)], capture_output=True, text=True, check=True
        )
        result = json.loads(run.stdout) | {"mb": round(size / (1 << 20), 1)}
        result["events_per_s"] = round(result["events"] / result["seconds"])
        results.append(result)
        path.unlink()
    print("| file MB | events | events/s | peak RSS MiB | problems |")
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['mb']} | {r['events']:,} | {r['events_per_s']:,} | {r['peak_mib']} | {r['problems']} |")
    (OUT / "pgaudit.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
