"""Benchmark: a whole `manage.py ingest` of the bench binlog, and the rows of its statement of
100,000 rows, page by page.

    .venv/bin/python bench/binlog_rows_bench.py [--runs 3]

Needs PostgreSQL (the DATABASE_URL server: a database of its own is made and dropped) and
Redis (REDIS_URL), and the binlog bench/binlog_bench.py makes (run it first).

1. Ingest, `--runs` times, each in a fresh process into a fresh server label: CPU seconds of
   the process (wait4), of which the metadata pass (`ingest.binlog.metadata.scan`, timed
   inside the process by wrapping it) and Django's start; the rest is the writer (COPY of
   the transactions, statements and changes). The join (`join_binlogs`) is timed too with
   `--join` (on this binlog, with no general log, every row statement is joined to nothing),
   else left out. And the CPU seconds of the PostgreSQL backend serving the process (from
   /proc/<pid>/stat of `pg_backend_pid()`, read just before the process ends: the server is
   local). Peak RSS of the process. Done for the first 50 MB
   of the file and for all of it: memory should not grow with the file.
2. Rows of the 100,000-row statement: the API's page (`rows_page`, 1,000 rows) first and last
   (rows 99,000-99,999), and the event page's (`statements_shown`, 100 rows) first and last,
   each cold (its cache entry deleted first) and cached; wall and CPU seconds, min of `--runs`.

Writes bench/out/binlog_rows.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
BINLOGS = OUT / "binlog"
PG = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/auditweb").rsplit("/", 1)[0]

# Runs inside `manage.py`'s place: times the metadata pass and the join inside the process.
PROBE = """
import os, sys, time
t0 = time.process_time()
import django
django.setup()
from django.core.management import call_command
from django.db import connection
import ingest.binlog.metadata as metadata
import ingest.binlog_join as binlog_join  # the command imports join_binlogs from it when it joins
spent = {"scan": 0.0, "join": 0.0}
scan = metadata.scan
def timed_scan(stream, name):
    it = scan(stream, name)
    while True:
        a = time.process_time()
        try:
            item = next(it)
        except StopIteration:
            spent["scan"] += time.process_time() - a
            return
        spent["scan"] += time.process_time() - a
        yield item
metadata.scan = timed_scan
join = binlog_join.join_binlogs
def timed_join(server):
    a = time.process_time()
    try:
        return join(server) if os.environ.get("BENCH_JOIN") == "1" else 0
    finally:
        spent["join"] += time.process_time() - a
binlog_join.join_binlogs = timed_join
with connection.cursor() as c:
    c.execute("SELECT pg_backend_pid()")
    backend = c.fetchone()[0]
started = time.process_time()
call_command("ingest", "--server", sys.argv[1], *sys.argv[2:], stdout=open(os.devnull, "w"))
try:
    fields = open(f"/proc/{backend}/stat").read().rsplit(")", 1)[1].split()
    pg = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
except OSError:
    pg = None
print(started - t0, spent["scan"], spent["join"], pg)
"""


def psql(db: str, sql: str) -> str:
    out = subprocess.run(["psql", f"{PG}/{db}", "-tAqc", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def ingest_runs(env: dict[str, str], files: list[str], runs: int, label: str) -> dict[str, float]:
    best: dict[str, float] = {}
    for i in range(runs):
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, f"bench-{label}-{i}", *files],
            cwd=REPO, env=env, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if status:
            raise RuntimeError(f"ingest failed with status {status}")
        start_s, scan_s, join_s, pg_s = out.split()[-4:]
        cpu = usage.ru_utime + usage.ru_stime
        run = {
            "process_cpu_s": cpu,
            "django_start_cpu_s": float(start_s),
            "metadata_pass_cpu_s": float(scan_s),
            "join_cpu_s": float(join_s),
            "writer_cpu_s": cpu - float(start_s) - float(scan_s) - float(join_s),
            "postgresql_backend_cpu_s": float(pg_s) if pg_s != "None" else float("nan"),
            "wall_s": wall,
            "peak_rss_mb": usage.ru_maxrss / 1024,
        }
        for k, v in run.items():
            best[k] = max(best.get(k, v), v) if k == "peak_rss_mb" else min(best.get(k, v), v)
    return {k: round(v, 3) for k, v in best.items()}


def rows_timings(runs: int) -> dict[str, object]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.cache import caches

    from ingest.binlog.metadata import TableChange
    from ingest.models import BinlogChange, BinlogStatement
    from investigations.query import binlog as q
    from investigations.query.rows_cache import CACHE, slice_key

    statement = (
        BinlogStatement.objects.filter(rows=100_000).select_related("transaction__file__source_file").first()
    )
    if statement is None:
        raise SystemExit("no statement of 100,000 rows: make the binlog again with bench/binlog_bench.py")
    c = BinlogChange.objects.get(statement=statement)
    change = TableChange(c.table, c.change, c.rows, c.table_map_position, list(c.positions))
    source = statement.transaction.file.source_file
    schema = q.create_table_schema(statement.transaction.file.server, change.table)
    cache = caches[CACHE]

    def timed(label: str, call: Callable[[], int], skip: int, take: int) -> dict[str, float]:
        key = slice_key(source, change, schema, skip, take)
        best: dict[str, float] = {}
        for _ in range(runs):
            for kind in ("cold", "cached"):
                if kind == "cold":
                    cache.delete(key)
                w, c0 = time.perf_counter(), time.process_time()
                rows = call()
                wall, cpu = time.perf_counter() - w, time.process_time() - c0
                assert rows == take, (label, rows, take)
                for k, v in ((f"{kind}_wall_s", wall), (f"{kind}_cpu_s", cpu)):
                    best[k] = min(best.get(k, v), v)
        return {k: round(v, 4) for k, v in best.items()}

    statements = [statement]
    api_page, event_page = q.DEFAULT_PAGE, q.PAGE_ROWS
    last_api, last_event = 100_000 - api_page, 100_000 // event_page
    return {
        "statement_rows": statement.rows,
        "rows_events": len(change.positions),
        "api first page (rows 0-999)": timed(
            "api first", lambda: len(q.rows_page(statements, offset=0, limit=api_page).rows), 0, api_page
        ),
        "api last page (rows 99,000-99,999)": timed(
            "api last",
            lambda: len(q.rows_page(statements, offset=last_api, limit=api_page).rows),
            last_api,
            api_page,
        ),
        "event page, first (rows 1-100)": timed(
            "event first", lambda: q.statements_shown(statements, 1, None).last, 0, event_page
        ),
        "event page, last (rows 99,901-100,000)": timed(
            "event last",
            lambda: q.statements_shown(statements, last_event, None).last - (last_event - 1) * event_page,
            (last_event - 1) * event_page,
            event_page,
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--join", action="store_true", help="run the join in the ingest too")
    args = parser.parse_args()
    files = sorted(str(p) for p in BINLOGS.glob("mariadb-bin.0*"))
    if not files:
        raise SystemExit("no bench binlog: run bench/binlog_bench.py first")
    half = OUT / "binlog-50mb" / Path(files[0]).name
    half.parent.mkdir(parents=True, exist_ok=True)
    with open(files[0], "rb") as src, open(half, "wb") as dst:
        dst.write(src.read(50 * 1000 * 1000))  # cut inside an event: the scan says so, and stops
    db = f"auditweb_binrows_{os.getpid()}"
    subprocess.run(["psql", f"{PG}/postgres", "-qc", f'CREATE DATABASE "{db}"'], check=True)
    env = dict(os.environ, DATABASE_URL=f"{PG}/{db}", SECRET_KEY="bench", DEBUG="0")
    env["DJANGO_SETTINGS_MODULE"] = "auditweb.settings"
    env["BENCH_JOIN"] = "1" if args.join else "0"
    report: dict[str, object] = {"binlog_mb": round(sum(Path(p).stat().st_size for p in files) / 1e6, 1)}
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
        report["ingest 50 MB"] = ingest_runs(env, [str(half)], args.runs, "half")
        report["ingest"] = ingest_runs(env, files, args.runs, "full")
        report["transactions_stored"] = int(psql(db, "SELECT count(*) FROM ingest_binlogtransaction"))
        os.environ["DATABASE_URL"] = env["DATABASE_URL"]
        report["rows of a 100,000-row statement"] = rows_timings(args.runs)
    finally:
        if "django.db" in sys.modules:  # the rows part's connection, before dropping its database
            sys.modules["django.db"].connections.close_all()
        subprocess.run(["psql", f"{PG}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'])
    (OUT / "binlog_rows.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
