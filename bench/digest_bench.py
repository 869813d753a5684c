"""Benchmark: the digest (statements grouped by fingerprint) over a 200,000-event store, against
pt-query-digest's own report of the same log, in one run.

    flock -x /tmp/auditweb-cpu.lock .venv/bin/python bench/digest_bench.py [--events 200000] [--runs 5]

1. writes a MySQL 8 general log (deterministic): 2,000 connections of 25 accounts on 2 servers'
   worth of schemas (10 databases x 20 tables), each running statements from 40 shapes with
   changing literals (SELECT, INSERT, UPDATE, DELETE, a few DDL), so some thousands of
   fingerprints, with Connect and Quit records around them;
2. ingests it with `manage.py ingest` into a scratch PostgreSQL database (timed, for scale);
3. times `investigations.query.digest.digest` under the page's statement timeout, for several filters,
   and the whole page and API request through Django's test client (median of `--runs`);
4. times `pt-query-digest --type genlog` on the same file (its full report to /dev/null).
Prints a Markdown table; writes bench/out/digest.json. `BENCH_PG` names the PostgreSQL server.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out"
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DATABASES = ["shop", "billing", "crm", "hr", "inventory", "analytics", "auth", "cms", "mail", "logs"]
TABLES = ["orders", "customers", "invoices", "payments", "products", "stock", "users", "sessions", "messages",
          "events", "audit", "refunds", "carts", "addresses", "shipments", "coupons", "reviews", "tickets",
          "notes", "settings"]  # fmt: skip
SHAPES = [
    "SELECT * FROM {t} WHERE id = {n}",
    "SELECT id, status FROM {t} WHERE created_at > '2026-0{m}-01' ORDER BY id LIMIT {n}",
    "SELECT COUNT(*) FROM {t} WHERE status = 'open'",
    "SELECT a.id FROM {t} a JOIN {u} b ON b.id = a.id WHERE a.id IN ({n}, {k}, {n})",
    "INSERT INTO {t} (id, note) VALUES ({n}, 'note {k}')",
    "UPDATE {t} SET status = 'done', updated_at = NOW() WHERE id = {n}",
    "UPDATE {t} SET counter = counter + 1 WHERE id = {n}",
    "DELETE FROM {t} WHERE id = {n}",
    "DELETE FROM {t} WHERE created_at < '2025-0{m}-01'",
    "REPLACE INTO {t} (id, note) VALUES ({n}, 'r')",
]
BANNER = (
    "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
    "Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock\n"
    "Time                 Id Command    Argument\n"
)
RARE = ["TRUNCATE TABLE {t}", "ALTER TABLE {t} ADD COLUMN c{m} INT", "DROP TABLE IF EXISTS {t}_old"]
FILTERS = {
    "everything": {},
    "destructive=true": {"destructive": "true"},
    "table=orders": {"table": "orders"},
    "user=app3": {"user": "app3"},
    "two hours (since/until)": {"since": "2026-03-01T10:00:00Z", "until": "2026-03-01T12:00:00Z"},
}


def write_log(path: Path, events: int) -> int:
    """A general log of about `events` records; returns the number of records written."""
    rng = random.Random(19)
    t = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    step = timedelta(seconds=6 * 3600 / events)  # six hours of traffic
    written = 0
    with path.open("w") as f:
        f.write(BANNER)
        open_ids: list[int] = []
        next_id = 100
        db_of: dict[int, str] = {}
        while written < events:
            t += step
            stamp = t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            if len(open_ids) < 20 or rng.random() < 0.01:
                cid, next_id = next_id, next_id + 1
                db_of[cid] = rng.choice(DATABASES)
                who = f"app{rng.randrange(25)}@10.0.{cid % 250}.7"
                f.write(f"{stamp}\t{cid:>6} Connect\t{who} on {db_of[cid]} using TCP/IP\n")
                open_ids.append(cid)
            elif rng.random() < 0.005:
                cid = open_ids.pop(rng.randrange(len(open_ids)))
                f.write(f"{stamp}\t{cid:>6} Quit\t\n")
            else:
                cid = rng.choice(open_ids)
                shape = rng.choice(RARE) if rng.random() < 0.002 else rng.choice(SHAPES)
                table, other = rng.choice(TABLES), rng.choice(TABLES)
                if rng.random() < 0.3:  # a qualified name: other fingerprints
                    table = f"{rng.choice(DATABASES)}.{table}"
                sql = shape.format(
                    t=table, u=other, n=rng.randrange(10**6), k=rng.randrange(999), m=rng.randrange(1, 9)
                )
                f.write(f"{stamp}\t{cid:>6} Query\t{sql}\n")
            written += 1
    return written


def timed_runs(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / "digest-general.log"
    records = write_log(log, args.events)
    db = f"auditweb_digest_bench_{os.getpid()}"
    subprocess.run(["psql", f"{PG}/postgres", "-qc", f'CREATE DATABASE "{db}"'], check=True)
    env = dict(os.environ, DATABASE_URL=f"{PG}/{db}", SECRET_KEY="bench", DEBUG="0")
    result: dict = {"records": records, "log_bytes": log.stat().st_size, "runs": args.runs}
    try:
        subprocess.run([args.python, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
        start = time.perf_counter()
        ingest = [args.python, "manage.py", "ingest", "--server", "bench", "--timezone", "UTC", str(log)]
        subprocess.run(ingest, cwd=REPO, env=env, check=True, capture_output=True)
        result["ingest_s"] = time.perf_counter() - start
        result.update(measure(db, args.runs))
        exe = shutil.which("pt-query-digest")
        if exe:
            start = time.perf_counter()
            subprocess.run([exe, "--type", "genlog", str(log)], check=True, stdout=subprocess.DEVNULL)
            result["pt_query_digest_s"] = time.perf_counter() - start
    finally:
        subprocess.run(["psql", f"{PG}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'])
    (OUT / "digest.json").write_text(json.dumps(result, indent=2, default=str))
    report(result)
    return 0


def measure(db: str, runs: int) -> dict:
    os.environ.update(DATABASE_URL=f"{PG}/{db}", SECRET_KEY="bench", DEBUG="false")
    os.environ.update(ALLOWED_HOSTS="testserver,localhost", DJANGO_SETTINGS_MODULE="auditweb.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from ingest.models import Event
    from investigations.query.digest import DIGEST_MS, Digest, digest
    from investigations.query.filters import filter_events
    from investigations.query.limits import time_limit
    from investigations.roles import Role, set_role
    from investigations.views.digest import DIGEST_ROWS

    out: dict = {"events": Event.objects.count(), "filters": {}}
    for label, params in FILTERS.items():

        def run(params: dict = params) -> Digest:
            with time_limit(DIGEST_MS):
                return digest(filter_events(params).qs, limit=DIGEST_ROWS)

        found = run()
        out["filters"][label] = {
            "seconds": timed_runs(run, runs),
            "statements": found.statements,
            "fingerprints": found.fingerprints,
        }
    user = get_user_model().objects.create_user("bench-digest")
    set_role(user, Role.VIEWER)
    client = Client()
    client.force_login(user)
    out["page_s"] = timed_runs(lambda: client.get("/digest/").status_code == 200 or sys.exit("page"), runs)
    out["api_s"] = timed_runs(
        lambda: client.get("/api/v1/digest/").status_code == 200 or sys.exit("api"), runs
    )
    return out


def report(r: dict) -> None:
    pt = r.get("pt_query_digest_s")
    print(f"\n{r['records']:,} records, {r['log_bytes'] / 1e6:.1f} MB; {r['events']:,} events stored; "
          f"ingest {r['ingest_s']:.1f} s; median of {r['runs']} runs\n")  # fmt: skip
    print("| digest of | statements | fingerprints | time | vs pt-query-digest on the whole log |")
    print("| --- | --- | --- | --- | --- |")
    for label, f in r["filters"].items():
        ratio = f"{pt / f['seconds']:.1f}x faster" if pt else "n/a"
        ms = f"{f['seconds'] * 1000:,.0f} ms"
        print(f"| {label} | {f['statements']:,} | {f['fingerprints']:,} | {ms} | {ratio} |")
    print(f"| the page `/digest/` (everything, whole request) | | | {r['page_s'] * 1000:,.0f} ms | |")
    print(f"| the API `/api/v1/digest/` (everything, whole request) | | | {r['api_s'] * 1000:,.0f} ms | |")
    if pt:
        print(f"| `pt-query-digest --type genlog` (its report) | | | {pt * 1000:,.0f} ms | 1 |")


if __name__ == "__main__":
    sys.exit(main())
