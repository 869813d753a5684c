"""Benchmark: a SIEM polling `GET /api/v1/alerts/?after=<cursor>` with 10 million events stored.

    flock -x /tmp/auditweb-cpu.lock .venv/bin/python bench/alerts_bench.py generate --events 10000000
    flock -x /tmp/auditweb-cpu.lock .venv/bin/python bench/alerts_bench.py measure --polls 300
    .venv/bin/python bench/alerts_bench.py drop

`generate` fills a scratch database (`--db`, default auditweb_alerts10m) with events the way
bench/explorer_bench.py makes them (4 servers, 30 days, sessions of 200 statements; 13% of the
statements are UPDATE, DELETE, ALTER, TRUNCATE or DROP, a few switch logging off), then raises
the alerts the store would have raised for them, in time order: one per destructive,
anti-forensic or privilege-changing event (`ingest.alerts.KIND_SQL`/`WORTH_SQL`, as migration
0010 does), about 1.3 million, and a few source-health alerts between them.
`measure` polls through the real view (Django's test client in this process: token
authentication, the view, the feed's queries, the serializer; no socket), as a SIEM does: a
page of 100 after a cursor anywhere in the history (catching up), after the newest alert but
100 (the live edge), and after the newest (nothing new: the poll a caught-up SIEM makes every
few seconds). Figures are server time per poll, p50 and p95 over `--polls` polls each.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import explorer_bench  # noqa: E402


def generate(db: str, events: int) -> None:
    explorer_bench.generate(db, events)
    raise_alerts()


def raise_alerts() -> None:
    """The alerts of the events stored (Django set up on the database already)."""
    from django.db import connection

    from ingest.alerts import KIND_SQL, WORTH_SQL
    from ingest.models import Source

    began = time.perf_counter()
    source = Source.objects.first()
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO ingest_alert (kind, server, event_time, event_hash, event_id)"  # noqa: S608 (constants)
            f" SELECT {KIND_SQL}, server, occurred_at, record_hash, id FROM ingest_event"
            f" WHERE {WORTH_SQL} ORDER BY occurred_at, id"
        )
        for n in range(5):  # a few health alerts after the events (their positions are the newest)
            cur.execute(
                "INSERT INTO ingest_alert (kind, server, source_id, reason)"
                " VALUES ('source_health', %s, %s, %s)",
                [source.server, source.pk, f"no new data for {n + 2} h"],
            )
        cur.execute("VACUUM (ANALYZE) ingest_alert")
        cur.execute("SELECT count(*), count(*) FILTER (WHERE kind = 'destructive') FROM ingest_alert")
        total, destructive = cur.fetchone()
    print(f"raised {total:,} alerts ({destructive:,} destructive) in {time.perf_counter() - began:.0f} s")


def measure(db: str, polls: int) -> None:
    explorer_bench.setup_django(db)
    from django.db import connection
    from rest_framework.test import APIClient

    from ingest.models import Alert, Event

    key = explorer_bench.viewer_token("bench-siem")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    with connection.cursor() as cur:
        cur.execute("SELECT min(position), max(position), count(*) FROM ingest_alert")
        first, last, alerts = cur.fetchone()
    events = Event.objects.count()
    rng = random.Random(7)
    cases = {
        "catching up: 100 after a cursor anywhere": lambda: rng.randrange(first, last - 200),
        "the live edge: the newest 100": lambda: last - 100,
        "nothing new: after the newest alert": lambda: last,
    }
    print(f"{events:,} events, {alerts:,} alerts; {explorer_bench.machine()}")
    print("| poll | results | p50 | p95 |\n| --- | ---: | ---: | ---: |")
    for name, cursor_of in cases.items():
        client.get("/api/v1/alerts/", {"after": cursor_of()})  # warm
        times, sizes = [], []
        for _ in range(polls):
            after = cursor_of()
            began = time.perf_counter()
            response = client.get("/api/v1/alerts/", {"after": after})
            times.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, response.content[:300]
            sizes.append(len(response.json()["results"]))
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        median = statistics.median(times)
        print(f"| {name} | {statistics.median(sizes):.0f} | {median:.1f} ms | {p95:.1f} ms |", flush=True)
    assert Alert.objects.filter(event_hash__isnull=False).count() > 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # `alerts`: raise the alerts of a database bench/explorer_bench.py generated (the same events).
    ap.add_argument("command", choices=["generate", "alerts", "measure", "drop"])
    ap.add_argument("--db", default="auditweb_alerts10m")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--polls", type=int, default=300)
    args = ap.parse_args()
    if args.command == "generate":
        generate(args.db, args.events)
    elif args.command == "alerts":
        explorer_bench.setup_django(args.db)
        raise_alerts()
    elif args.command == "measure":
        measure(args.db, args.polls)
    else:
        explorer_bench.admin_sql(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
