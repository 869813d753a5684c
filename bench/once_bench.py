"""Benchmark: what exactly once costs PostgreSQL at ingest, before and after issue 22's item 3.

    .venv/bin/python bench/once_bench.py --old /work/main [--log bench/out/slap-general.log]
        [--rounds 3] [--out /tmp/once22]

Each variant ingests the log with `manage.py ingest` into a fresh database of a private
PostgreSQL cluster (bench/compare_trees.py's, so its CPU seconds are the ingest's alone), then
ingests the same file again under another name (a renamed copy: stores nothing). Variants:

- `old`: the `--old` checkout (the unique `(occurred_at, record_hash)` index, the slow path for
  a file read again);
- `new`: this checkout (checkpoints and content identity, ingest.identity; a plain btree on
  `occurred_at` in place of the unique index, for the explorer's time order);
- `new-time`: this checkout with that btree dropped too (what the time order costs).

The variants take turns, `--rounds` times; per variant the minimum of the rounds is kept: wall
and CPU seconds of the command (its parsing process included), PostgreSQL's CPU seconds, for
the first read and for the copy read again. Results: a Markdown table and once.json in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from compare_trees import Cluster, timed_command  # noqa: E402

NO_TIME_INDEX = "DROP INDEX event_time_order"


def run(cluster: Cluster, tree: Path, template: str, log: Path, copy: Path, python: str) -> dict:
    db = f"run_{os.getpid()}_{time.monotonic_ns()}"
    cluster.psql(f'CREATE DATABASE "{db}" TEMPLATE "{template}"')
    env = dict(os.environ, DATABASE_URL=f"{cluster.url}/{db}", SECRET_KEY="bench", DEBUG="0")
    result: dict = {}
    try:
        for name, path in (("first", log), ("again", copy)):
            pg_before = cluster.cpu_seconds()
            argv = [python, "manage.py", "ingest", "--format", "general-log", "--server", "bench", str(path)]
            r = timed_command(argv, tree, env)
            r["pg_cpu"] = cluster.cpu_seconds() - pg_before
            r["events"] = int(cluster.psql("SELECT count(*) FROM ingest_event", db))
            result[name] = r
        return result
    finally:
        cluster.psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--log", type=Path, default=REPO / "bench" / "out" / "slap-general.log")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("/tmp/once22"))
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    copy = args.out / "renamed-copy.log"
    shutil.copyfile(args.log, copy)
    trees = {"old": args.old.resolve(), "new": REPO, "new-time": REPO}
    cluster = Cluster()
    results: dict[str, list[dict]] = {name: [] for name in trees}
    try:
        for name, tree in trees.items():
            skip = r"/(\.venv|\.git|node_modules|\.devdata)/"
            subprocess.run([args.python, "-m", "compileall", "-q", "-x", skip, str(tree)], check=True)
            template = "t_" + name.replace("-", "_")
            cluster.psql(f'CREATE DATABASE "{template}"')
            env = dict(os.environ, DATABASE_URL=f"{cluster.url}/{template}", SECRET_KEY="bench", DEBUG="0")
            subprocess.run([args.python, "manage.py", "migrate", "-v0"], cwd=tree, env=env, check=True)
            if name == "new-time":
                cluster.psql(NO_TIME_INDEX, template)
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for name in order:
                template = "t_" + name.replace("-", "_")
                r = run(cluster, trees[name], template, args.log, copy, args.python)
                results[name].append(r)
                print(
                    f"round {round_ + 1} {name}: {r['first']['events']:,} events;"
                    f" first CPU {r['first']['cpu']:.2f} s, PostgreSQL {r['first']['pg_cpu']:.2f} s;"
                    f" again CPU {r['again']['cpu']:.2f} s, PostgreSQL {r['again']['pg_cpu']:.2f} s,"
                    f" {r['again']['events']:,} events after it",
                    flush=True,
                )
    finally:
        cluster.stop()
    summary = {
        name: {
            read: {key: min(r[read][key] for r in runs) for key in ("wall", "cpu", "pg_cpu")}
            | {"events": runs[0][read]["events"]}
            for read in ("first", "again")
        }
        for name, runs in results.items()
    }
    (args.out / "once.json").write_text(json.dumps({"rounds": results, "min": summary}, indent=2))
    print(
        "| variant | events | first: wall s | CPU s | PostgreSQL CPU s"
        " | again: wall s | CPU s | PostgreSQL CPU s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, m in summary.items():
        f, a = m["first"], m["again"]
        print(
            f"| {name} | {f['events']:,} | {f['wall']:.2f} | {f['cpu']:.2f} | {f['pg_cpu']:.2f}"
            f" | {a['wall']:.2f} | {a['cpu']:.2f} | {a['pg_cpu']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
