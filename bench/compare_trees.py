"""Benchmark: two checkouts of AuditWeb ingesting the same files, in one run, against pt-query-digest.

    .venv/bin/python bench/compare_trees.py --old /path/to/old/checkout [--new .] [--rounds 3]
        [--log bench/out/slap-general.log] [--mb 100] [--formats general-log mariadb-audit ...]
        [--out bench/out]

For a change that must keep the figures (a renovation): each file is ingested by
`manage.py ingest` of each checkout, the two taking turns, `--rounds` times, into a fresh
database of a private PostgreSQL cluster that this script starts (so its CPU seconds are the
ingest's alone, whatever else the machine runs). Per run it counts wall seconds, CPU seconds
of the ingest command (its parsing process included) and CPU seconds of PostgreSQL (every
process of the private cluster), and keeps the minimum of the rounds. The general log is also
read by `pt-query-digest --type genlog --no-report` in every round, so the ratio to the peer
tool comes from the same run. The other formats are written from the general log's traffic as
bench/formats_bench.py writes them, until each file holds --mb MB. Both checkouts must store the
same number of events. Both checkouts are byte-compiled first (python -m compileall), as an
installed app is. Results: a Markdown table and compare.json in `--out` (bench/out).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
OUT = REPO / "bench" / "out"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
TICKS = os.sysconf("SC_CLK_TCK")


class Cluster:
    """A private PostgreSQL cluster: the CPU seconds of its processes are the bench's alone."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="auditweb-compare-"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        as_postgres = os.geteuid() == 0
        if as_postgres:
            shutil.chown(self.dir, "postgres")
        self._run([str(PG_BIN / "initdb"), "-D", str(self.dir / "data"), "-U", "postgres", "-A", "trust"])
        self._run(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-w", "start",
             "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"]
        )  # fmt: skip
        self.url = f"postgres://postgres@127.0.0.1:{self.port}"
        self.postmaster = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])

    def _run(self, argv: list[str]) -> None:
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, capture_output=True)

    def cpu_seconds(self) -> float:
        """CPU of the postmaster, of its children that ended, and of those still running."""
        total = 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            pid, ppid = int(stat.parent.name), int(fields[1])
            if pid == self.postmaster:
                total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
            elif ppid == self.postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / TICKS

    def psql(self, sql: str, db: str = "postgres") -> str:
        return subprocess.run(
            ["psql", f"{self.url}/{db}", "-tAqc", sql], check=True, capture_output=True, text=True
        ).stdout.strip()

    def stop(self) -> None:
        try:
            os.kill(self.postmaster, signal.SIGINT)
            for _ in range(100):
                os.kill(self.postmaster, 0)
                time.sleep(0.1)
        except ProcessLookupError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def timed_command(argv: list[str], cwd: Path, env: dict[str, str]) -> dict:
    """Wall seconds, CPU seconds (user + system, its children included) and peak RSS of a command."""
    start = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%U %S %M", *argv], cwd=cwd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{argv} failed: {proc.stderr[-2000:]}")
    user, system, rss = proc.stderr.split()[-3:]
    return {"wall": wall, "cpu": float(user) + float(system), "peak_rss_mib": int(rss) / 1024}


def ingest(cluster: Cluster, tree: Path, template: str, path: Path, fmt: str, python: str) -> dict:
    db = f"run_{os.getpid()}_{time.monotonic_ns()}"
    cluster.psql(f'CREATE DATABASE "{db}" TEMPLATE "{template}"')
    env = dict(os.environ, DATABASE_URL=f"{cluster.url}/{db}", SECRET_KEY="bench", DEBUG="0")
    try:
        pg_before = cluster.cpu_seconds()
        argv = [python, "manage.py", "ingest", "--format", fmt, "--server", "bench", str(path)]
        result = timed_command(argv, tree, env)
        result["pg_cpu"] = cluster.cpu_seconds() - pg_before
        result["events"] = int(cluster.psql("SELECT count(*) FROM ingest_event", db))
        result["store_bytes"] = store_bytes(cluster, db)
        return result
    finally:
        cluster.psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


# What the store holds of a log: the event table (its partitions, their indexes and TOAST; the
# narrow rows' table where the checkout has them), the statement dictionary, the content chunks
# where the checkout has them (issue 22), and the custody links.
_STORE_SQL = """
SELECT coalesce((SELECT sum(pg_total_relation_size(i.inhrelid)) FROM pg_inherits i
                 WHERE i.inhparent IN (SELECT oid FROM pg_class WHERE relkind = 'p'
                                       AND relname IN ('ingest_event', 'ingest_event_row'))), 0)
     + coalesce(pg_total_relation_size(to_regclass('ingest_statement')), 0)
     + coalesce(pg_total_relation_size(to_regclass('ingest_rawchunk')), 0)
     + pg_total_relation_size('ingest_custodylink')
"""


def store_bytes(cluster: Cluster, db: str) -> int:
    cluster.psql("VACUUM ANALYZE", db)  # (sizes as they settle: the visibility maps made)
    return int(cluster.psql(_STORE_SQL, db))


def files(log: Path, mb: int, formats: list[str], out: Path = OUT) -> dict[str, Path]:
    # imported here: it reads the general log's traffic only when another format is asked
    import formats_bench

    found = {"general-log": log} if "general-log" in formats else {}
    rows = None
    for fmt in formats:
        if fmt == "general-log":
            continue
        path = out / f"compare-{fmt}-{mb}mb.log"
        if not path.exists():
            rows = rows or formats_bench.events(log)
            formats_bench.write(path, fmt, rows, mb * 1_000_000)
        found[fmt] = path
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, default=REPO)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log", type=Path, default=OUT / "slap-general.log")
    ap.add_argument("--mb", type=int, default=100)
    every = ["general-log", "mariadb-audit", "json-audit", "xml-audit", "audit-csv"]
    ap.add_argument("--formats", nargs="*", default=every)
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    ap.add_argument("--out", type=Path, default=OUT, help="where the files and compare.json go")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    inputs = files(args.log, args.mb, args.formats, args.out)
    cluster = Cluster()
    results: dict[str, dict[str, list[dict]]] = {fmt: {"old": [], "new": []} for fmt in inputs}
    pt: list[dict] = []
    try:
        for name, tree in trees.items():
            # Each checkout's bytecode first, as an installed app has it: with PYTHONDONTWRITEBYTECODE
            # set (as on the development machine) every run would compile the project's modules
            # again, a start-up cost no user pays, and the same for both checkouts.
            skip = r"/(\.venv|\.git|node_modules|\.devdata)/"
            subprocess.run([args.python, "-m", "compileall", "-q", "-x", skip, str(tree)], check=True)
            cluster.psql(f'CREATE DATABASE "t_{name}"')
            env = dict(os.environ, DATABASE_URL=f"{cluster.url}/t_{name}", SECRET_KEY="bench", DEBUG="0")
            subprocess.run([args.python, "manage.py", "migrate", "-v0"], cwd=tree, env=env, check=True)
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for fmt, path in inputs.items():
                for name in order:
                    r = ingest(cluster, trees[name], f"t_{name}", path, fmt, args.python)
                    results[fmt][name].append(r)
                    figures = f"wall {r['wall']:.2f} s, CPU {r['cpu']:.2f} s, PostgreSQL {r['pg_cpu']:.2f} s"
                    print(f"round {round_ + 1} {fmt} {name}: {r['events']:,} events, {figures}", flush=True)
            if "general-log" in inputs and shutil.which("pt-query-digest"):
                argv = ["pt-query-digest", "--type", "genlog", "--no-report", str(inputs["general-log"])]
                pt.append(timed_command(argv, REPO, dict(os.environ)))
                print(f"round {round_ + 1} pt-query-digest: wall {pt[-1]['wall']:.2f} s", flush=True)
    finally:
        cluster.stop()

    summary: dict[str, dict] = {}
    for fmt, by_tree in results.items():
        counts = {r["events"] for runs in by_tree.values() for r in runs}
        if len(counts) != 1:
            raise SystemExit(f"{fmt}: the checkouts stored different numbers of events: {sorted(counts)}")
        summary[fmt] = {
            name: {key: min(r[key] for r in runs) for key in ("wall", "cpu", "pg_cpu", "peak_rss_mib")}
            | {"events": runs[0]["events"], "store_bytes": runs[0]["store_bytes"]}
            for name, runs in by_tree.items()
        }
    pt_best = min((p["wall"] for p in pt), default=None)
    record = {
        "trees": {k: str(v) for k, v in trees.items()},
        "files": {k: str(v) for k, v in inputs.items()},
        "rounds": results,
        "pt_query_digest": pt,
        "min": summary,
    }
    (args.out / "compare.json").write_text(json.dumps(record, indent=2))
    print(
        "| file | checkout | events | wall s | events/s | vs pt-query-digest | ingest CPU s"
        " | PostgreSQL CPU s | store MB per GB of log |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for fmt, by_tree in summary.items():
        for name, m in by_tree.items():
            rate = m["events"] / m["wall"]
            # the same file read by both: the ratio of rates is the ratio of times
            ratio = f"{pt_best / m['wall']:.2f}x" if pt_best and fmt == "general-log" else ""
            per_gb = m["store_bytes"] / inputs[fmt].stat().st_size * 1000
            print(f"| {fmt} | {name} | {m['events']:,} | {m['wall']:.2f} | {rate:,.0f} | {ratio} "
                  f"| {m['cpu']:.2f} | {m['pg_cpu']:.2f} | {per_gb:,.0f} |")  # fmt: skip
    if pt_best:
        print(f"pt-query-digest --type genlog --no-report: {pt_best:.2f} s (min of {len(pt)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
