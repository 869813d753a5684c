"""Benchmark: which index of the event rows serves which page, and what each costs a COPY.

Issue 22, item 5 ("indexes the pages need, and no more"), on a database `explorer_bench.py
generate` made (and `alerts_bench.py alerts` for the polls):

- `plans`: migrates the database (as `alerts_bench.py measure` does), then asks each page of
  `explorer_bench.pages()` once (but those named with `--skip`), two alerts polls and two API
  listings, through Django's test client; runs `EXPLAIN` on every
  SELECT each made and prints the indexes of those plans per page (a partition's index named
  as its partitioned one).
- `walks`: in one transaction, rolled back: the pages' id queries in time order with the unique
  `(occurred_at, record_hash)` index, without it, and with a b-tree on `(occurred_at, id)`
  instead (EXPLAIN ANALYZE). Holds an exclusive lock on the event rows while it runs.
- `copycost`: COPYs 1,000,000 of the store's narrow rows (binary, in time order, as the writer
  sends them) into a scratch partitioned copy of `ingest_event_row` with each set of indexes,
  VACUUM included; CPU seconds of the PostgreSQL backend (read from /proc: same machine), the
  least of 3 runs.

Results and commands: docs/benchmarks.md, "Which index serves which page".
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import explorer_bench  # noqa: E402

# The row's indexes (migration 0026) but the unique one: what the store has once exactly once
# is kept by checkpoints (branch once22).
ROW_INDEXES = [
    "CREATE INDEX ON {t} (id)",
    "CREATE INDEX ON {t} USING brin (occurred_at)",
    "CREATE INDEX ON {t} (occurred_at DESC) WHERE destructive",
    "CREATE INDEX ON {t} (occurred_at DESC) WHERE flags @> '{{anti_forensic}}'::varchar(40)[]",
    "CREATE INDEX ON {t} (session_id, occurred_at)",
    "CREATE INDEX ON {t} USING gin (tables)",
    "CREATE INDEX ON {t} USING gin (tables) WHERE destructive",
    "CREATE INDEX ON {t} (occurred_at)"
    " WHERE destructive AND statement_type IN ('RENAME TABLE', 'ALTER TABLE')",
]
INDEX_SETS = {
    "the rows' indexes but the unique one": ROW_INDEXES,
    "+ b-tree (occurred_at, id)": [*ROW_INDEXES, "CREATE INDEX ON {t} (occurred_at, id)"],
    "+ unique (occurred_at, record_hash) instead": [
        *ROW_INDEXES,
        "CREATE UNIQUE INDEX ON {t} (occurred_at, record_hash) NULLS NOT DISTINCT",
    ],
}
PLAN_INDEX = re.compile(r"Index (?:Only )?Scan (?:Backward )?using (\w+)|Bitmap Index Scan on (\w+)")
NEWEST = (
    "SELECT id FROM ingest_event WHERE occurred_at IS NOT NULL ORDER BY occurred_at DESC, id DESC LIMIT 51"
)
OLDEST = "SELECT id FROM ingest_event WHERE occurred_at IS NOT NULL ORDER BY occurred_at, id LIMIT 51"
LAST_TIME = (
    "SELECT occurred_at FROM ingest_event WHERE occurred_at IS NOT NULL ORDER BY occurred_at DESC LIMIT 1"
)


def plans(db: str, skip: set[str]) -> None:
    explorer_bench.setup_django(db)
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from investigations.roles import Role, set_role

    user, _ = get_user_model().objects.get_or_create(username="bench-investigator")
    set_role(user, Role.INVESTIGATOR)
    browser = Client()
    browser.force_login(user)
    siem = APIClient()
    siem.credentials(HTTP_AUTHORIZATION=f"Token {explorer_bench.viewer_token('bench-siem')}")
    with connection.cursor() as cur:
        cur.execute("SELECT coalesce(max(position), 100) FROM ingest_alert")
        last = cur.fetchone()[0]
        cur.execute(
            "SELECT c.relname, p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " JOIN pg_class p ON p.oid = i.inhparent WHERE c.relkind = 'i'"
        )
        parent = dict(cur.fetchall())  # a partition's index: the partitioned index it belongs to
    asked = [
        (name, url, headers, browser) for name, url, headers in explorer_bench.pages() if name not in skip
    ]
    asked += [
        ("alerts poll: catching up", f"/api/v1/alerts/?after={last // 2}", {}, siem),
        ("alerts poll: the live edge", f"/api/v1/alerts/?after={last - 100}", {}, siem),
        ("API events: newest", "/api/v1/events/?page_size=100", {}, siem),
        ("API events: one table", "/api/v1/events/?table=shop.orders&page_size=100", {}, siem),
    ]
    for name, url, headers, client in asked:
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url, follow=True, **headers)
        assert response.status_code == 200, (url, response.status_code)
        used = set()
        for query in queries.captured_queries:
            if not query["sql"].lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            with connection.cursor() as cur:
                cur.execute(f"EXPLAIN {query['sql']}")
                plan = "\n".join(row[0] for row in cur.fetchall())
            used |= {parent.get(a or b, a or b) for a, b in PLAN_INDEX.findall(plan)}
        events = sorted(i for i in used if i.startswith("event_") or i == "ingest_statement_pkey")
        print(f"{name:50} {', '.join(events)}", flush=True)


def walks(db: str) -> None:
    import psycopg

    def explain(cur: psycopg.Cursor, label: str, sql: str) -> None:
        cur.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}")  # (constants of this module)
        plan = [row[0] for row in cur.fetchall()]
        node = next(line.strip() for line in plan[1:] if "->" in line).lstrip("-> ")
        print(f"{label:34} {plan[-1].strip():28} {node[:90]}", flush=True)

    with psycopg.connect(f"{explorer_bench.PG}/{db}") as conn, conn.cursor() as cur:
        cur.execute("SET LOCAL lock_timeout = '10s'")
        for state in ("with the unique index", "without it", "with (occurred_at, id) instead"):
            if state == "without it":
                cur.execute("DROP INDEX event_record_once")
            elif state.startswith("with (occurred_at"):
                cur.execute("CREATE INDEX bench_time_id ON ingest_event_row (occurred_at, id)")
            print(f"-- {state}")
            for label, sql in (("newest page, no filter", NEWEST), ("oldest page, no filter", OLDEST),
                               ("newest time (chart bound)", LAST_TIME)):  # fmt: skip
                explain(cur, label, sql)
        conn.rollback()


def backend_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def copycost(db: str, rows: int, runs: int = 3) -> None:
    import psycopg

    with psycopg.connect(f"{explorer_bench.PG}/{db}", autocommit=True) as conn:
        pid, data = conn.info.backend_pid, bytearray()
        with conn.cursor() as cur:
            select = f"SELECT * FROM ingest_event_row ORDER BY occurred_at LIMIT {rows:d}"  # noqa: S608 (an int)
            with cur.copy(f"COPY ({select}) TO STDOUT (FORMAT binary)") as copy:
                for chunk in copy:
                    data += chunk
        print(f"{rows:,} rows, {len(data) / 1e6:.0f} MB of binary COPY; load {os.getloadavg()[0]:.1f}")
        for label, indexes in INDEX_SETS.items():
            conn.execute("DROP TABLE IF EXISTS bench_index_copy")
            conn.execute(
                "CREATE TABLE bench_index_copy (LIKE ingest_event_row) PARTITION BY RANGE (occurred_at)"
            )
            conn.execute(
                "CREATE TABLE bench_index_copy_p PARTITION OF bench_index_copy"
                " FOR VALUES FROM (MINVALUE) TO (MAXVALUE)"
            )
            for sql in indexes:
                conn.execute(sql.format(t="bench_index_copy"))
            figures = []
            for _ in range(runs):
                conn.execute("TRUNCATE bench_index_copy")
                cpu, began = backend_cpu_s(pid), time.perf_counter()
                with (
                    conn.cursor() as cur,
                    cur.copy("COPY bench_index_copy FROM STDIN (FORMAT binary)") as copy,
                ):
                    copy.write(bytes(data))
                conn.execute("VACUUM bench_index_copy")  # GIN's pending list is merged here: part of the cost
                figures.append((backend_cpu_s(pid) - cpu, time.perf_counter() - began))
            cpu, wall = min(figures)
            print(
                f"{label:45} PostgreSQL CPU {cpu:5.2f} s (least of {runs}; its wall {wall:.1f} s)", flush=True
            )
        conn.execute("DROP TABLE bench_index_copy")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["plans", "walks", "copycost"])
    ap.add_argument("--db", default="auditweb_bench10m")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--skip", action="append", default=[], help="a page of explorer_bench.pages() not asked")
    args = ap.parse_args()
    if args.command == "plans":
        plans(args.db, set(args.skip))
    elif args.command == "walks":
        walks(args.db)
    else:
        copycost(args.db, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
