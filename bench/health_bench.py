"""Benchmark: what judging a source's health costs (ingest.sources.source_health), which the
dashboard, the Sources pages and the API do for every source on every request.

    flock -x /tmp/auditweb-cpu.lock .venv/bin/python bench/health_bench.py --sources 50 --runs 43200

Makes a scratch database (`--db`, default auditweb_health_bench, dropped first) with `--sources`
live-table sources, each with `--runs` ingest runs a minute apart (30 days at the default),
one in `--every` of which delivered rows: the worst case for the look-up of recent deliveries, a
source polled every minute whose deliveries are rare. Then times `source_health` over all
sources (p50 and p95 per source over `--rounds` rounds) and the Sources page through Django's
test client, and counts the queries per source. `BENCH_PG` (default
postgres://postgres@127.0.0.1:5432) names the server.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import explorer_bench  # noqa: E402

RUNS_SQL = """
INSERT INTO ingest_ingestrun (source_id, status, started_at, finished_at, bytes_read, bytes_total,
                              events_seen, events_stored, problems, error)
SELECT s.id, 'done', now() - g * interval '1 minute', now() - g * interval '1 minute',
       CASE WHEN g %% %(every)s = 0 THEN 10 ELSE 0 END, 0, 0, 0, 0, ''
FROM ingest_source s, generate_series(1, %(runs)s) AS g
"""


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--db", default="auditweb_health_bench")
    parser.add_argument("--sources", type=int, default=50)
    parser.add_argument("--runs", type=int, default=43200)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    explorer_bench.admin_sql(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
    explorer_bench.admin_sql(f'CREATE DATABASE "{args.db}"')
    explorer_bench.setup_django(args.db)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from ingest.models import Source
    from ingest.sources import source_health
    from investigations.roles import Role, set_role

    call_command("migrate", verbosity=0)
    for i in range(args.sources):
        Source.objects.create(name=f"db{i}", kind="mysql-table", dsn=f"mysql://r@db{i}:3306", server=f"db{i}")
    with connection.cursor() as cur:
        cur.execute(RUNS_SQL, {"every": args.every, "runs": args.runs})
        cur.execute("ANALYZE ingest_ingestrun")
    sources = list(Source.objects.all())
    per_source: list[float] = []
    for _ in range(args.rounds):
        for source in sources:
            started = time.perf_counter()
            source_health(source)
            per_source.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as queries:
        states = {source_health(s).state for s in sources}
    per_source_queries = len(queries) / len(sources)
    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    set_role(user, Role.VIEWER)
    client = Client()
    client.force_login(user)
    client.get("/sources/")  # templates loaded and compiled once, as in a running server
    pages = []
    for _ in range(args.rounds):
        reset_queries()
        started = time.perf_counter()
        assert client.get("/sources/").status_code == 200
        pages.append((time.perf_counter() - started) * 1000)
    p95 = statistics.quantiles(per_source, n=20)[-1]
    print(
        f"{args.sources} sources x {args.runs:,} runs (1 in {args.every} delivered), "
        f"states {sorted(states)}: "
        f"source_health p50 {statistics.median(per_source):.1f} ms, p95 {p95:.1f} ms, "
        f"{per_source_queries:.1f} queries per source; "
        f"Sources page p50 {statistics.median(pages):.0f} ms"
    )
    connection.close()
    explorer_bench.admin_sql(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')


if __name__ == "__main__":
    main()
