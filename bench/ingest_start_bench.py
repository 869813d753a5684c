"""Benchmark: CPU seconds of `manage.py ingest` per process: the writer (the command), its parsing process.

    DATABASE_URL=... .venv/bin/python bench/ingest_start_bench.py LOG [LOG...] [--runs 5]

Run from the checkout to measure (it runs that checkout's `manage.py ingest`, its `main()` in a
fresh interpreter, as the command line does: Django set up, then the command). Each run ingests
each LOG under a server label of its own, so every run stores its events anew. After each run:
the CPU seconds of this process (the writer: Django's start-up, the command, the COPY) and of
its waited-for children (the parsing process the command forks), from getrusage; the minimum of
`--runs` (each run is a fresh interpreter, so the start-up is counted every time). Also how much
of the writer's share was spent before the command began (Django's start-up and the command's
imports).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ONE_RUN = r"""
import json, os, resource, sys
sys.path.insert(0, os.getcwd())
from django.core.management.base import BaseCommand
started = None
execute = BaseCommand.execute
def counted(self, *args, **options):  # the command begins: what came before is the start-up
    global started
    started = resource.getrusage(resource.RUSAGE_SELF)
    return execute(self, *args, **options)
BaseCommand.execute = counted
sys.argv = ["manage.py", "ingest", *sys.argv[2:], "--server", sys.argv[1]]
sys.stdout = open(os.devnull, "w")
import manage
manage.main()  # as the command line runs it: the checkout's manage.py, Django set up, the command
sys.stdout = sys.__stdout__
me = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "start": started.ru_utime + started.ru_stime,
    "writer": me.ru_utime + me.ru_stime,
    "parser": kids.ru_utime + kids.ru_stime,
}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    python = str(Path(".venv/bin/python").absolute()) if Path(".venv/bin/python").exists() else sys.executable
    for log in args.logs:
        best: dict[str, float] = {}
        for run in range(args.runs):
            label = f"start-bench-{os.getpid()}-{time.monotonic_ns()}-{run}"
            out = subprocess.run(
                [python, "-c", ONE_RUN, label, str(log.resolve())],
                check=True,
                capture_output=True,
                text=True,
                env=dict(os.environ, SECRET_KEY=os.environ.get("SECRET_KEY", "bench")),
            ).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            for key, value in figures.items():
                best[key] = min(best.get(key, value), value)
        load = os.getloadavg()[0]
        print(
            f"{log}: writer {best['writer']:.2f} CPU s (of which {best['start']:.2f} before the command),"
            f" parsing process {best['parser']:.2f} CPU s; min of {args.runs}; load average {load:.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
