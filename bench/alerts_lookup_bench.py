"""Benchmark: the alerts feed's lookup of a page's events, in the server alone, before and after
issue 22's item 3 (alerts named by (time, record hash) through the unique index, against alerts
named by event id through the id index).

    .venv/bin/python bench/alerts_lookup_bench.py --old-db DB --new-db DB [--pages 200]

`--old-db`: a store at migration 0026 with alerts (main's `bench/alerts_bench.py generate`);
`--new-db`: a copy of it migrated to 0027 (`CREATE DATABASE new TEMPLATE old`, then `manage.py
migrate`). For `--pages` random cursors, the same page of 100 alerts is looked up in both,
alternating which goes first; the figures are PostgreSQL's execution times (EXPLAIN ANALYZE).
`BENCH_PG` (default postgres://postgres@127.0.0.1:5432) names the server.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics

import psycopg

PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
PAGE = """SELECT event_time, event_hash, {id} FROM ingest_alert
WHERE position > %s AND event_hash IS NOT NULL ORDER BY position LIMIT 100"""
BY_KEYS = """EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) SELECT e.id FROM ingest_event e
WHERE (e.occurred_at, e.record_hash) IN (SELECT * FROM unnest(%s::timestamptz[], %s::bytea[]))
  AND e.occurred_at = ANY(%s::timestamptz[])"""
BY_IDS = """EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) SELECT e.id FROM ingest_event e
WHERE e.id = ANY(%s::bigint[])"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old-db", required=True)
    ap.add_argument("--new-db", required=True)
    ap.add_argument("--pages", type=int, default=200)
    args = ap.parse_args()
    old = psycopg.connect(f"{PG}/{args.old_db}", autocommit=True)
    new = psycopg.connect(f"{PG}/{args.new_db}", autocommit=True)
    first, last = old.execute("SELECT min(position), max(position) FROM ingest_alert").fetchone()
    rng = random.Random(22)
    times: dict[str, list[float]] = {"old": [], "new": []}
    for page in range(args.pages):
        after = rng.randrange(first, last - 200)
        keys = old.execute(PAGE.format(id="NULL"), [after]).fetchall()
        ids = [row[2] for row in new.execute(PAGE.format(id="event_id"), [after]).fetchall()]
        when, digest = [k[0] for k in keys], [k[1] for k in keys]
        for name in ("old", "new") if page % 2 == 0 else ("new", "old"):
            if name == "old":
                plan = old.execute(BY_KEYS, [when, digest, when]).fetchone()[0][0]
            else:
                plan = new.execute(BY_IDS, [ids]).fetchone()[0][0]
            assert plan["Plan"]["Actual Rows"] == len(keys), plan["Plan"]["Actual Rows"]
            times[name].append(plan["Execution Time"])
    for name, found in times.items():
        found.sort()
        p95 = found[round(0.95 * (len(found) - 1))]
        print(f"{name}: median {statistics.median(found):.2f} ms, p95 {p95:.2f} ms over {len(found)} pages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
