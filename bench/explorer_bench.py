"""Benchmark: the investigation pages over millions of events, server time per page.

`generate` writes the events with SQL into the migrated event table (a busy fleet's shape),
`measure` asks each page as a browser would and times it inside Django, `indexcost` prices the
investigation indexes for ingestion, `drop` removes the scratch database. The commands, the
data's shape and the results: docs/benchmarks.md, "The investigation pages over 10 million
events". `BENCH_PG` (default postgres://postgres@127.0.0.1:5432) names the server; `--db` the
database.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out"
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
START = datetime(2026, 10, 1, tzinfo=UTC)
DAYS = 30
DATABASES = ["shop", "billing", "crm", "hr", "inventory", "analytics", "auth", "cms", "mail", "logs"]
TABLES = ["orders", "customers", "invoices", "payments", "products", "stock", "users", "sessions", "messages",
          "events", "audit", "refunds", "carts", "addresses", "shipments", "coupons", "reviews", "tickets",
          "notes", "settings"]  # fmt: skip
SESSION_LENGTH = 200  # statements a session
INTERLEAVED = 10  # sessions writing at the same time
CHUNK = 500_000  # events an INSERT


def setup_django(db: str) -> None:
    os.environ["DATABASE_URL"] = f"{PG}/{db}"
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    os.environ["ALLOWED_HOSTS"] = "testserver,localhost"
    os.environ["DEBUG"] = "false"
    os.environ["DATABASE_CONN_MAX_AGE"] = "86400"  # one backend for the whole run: its CPU is read
    import django

    django.setup()


def viewer_token(username: str) -> str:
    """The database migrated to the newest schema, and an API key of a viewer named `username`."""
    # Imported here: Django is set up (setup_django) only once the database is named.
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from investigations.models import api_token_create
    from investigations.roles import Role, set_role

    call_command("migrate", verbosity=0)  # (a database generated before the newest migrations)
    user, _ = get_user_model().objects.get_or_create(username=username)
    set_role(user, Role.VIEWER)
    return api_token_create(user=user)[1]


def admin_sql(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def _array(values: list[str]) -> str:
    return "(ARRAY[" + ", ".join(f"'{v}'" for v in values) + "])"


# One statement per row i: its session is (i / 2000) * 10 + i % 10 (ten sessions interleaved, each
# of 200 statements); what it does is drawn from a hash of i, its table from another.
EVENTS_SQL = """
INSERT INTO bench_wide (occurred_at, server, connection_id, "user", host, ip, database, command,
    statement_type, tables, destructive, flags, sql, fingerprint, rows_affected, status, raw, line,
    byte_offset, record_hash, ingest_run_id, session_id, source_file_id)
SELECT ts, s.server, s.connection_id, s."user", s.host, s.ip, s.database, 'Query',
    k.type, k.tables, k.destructive, k.flags, k.sql, k.type, NULL, NULL,
    convert_to(to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || E'\\t'
               || s.connection_id || E' Query\\t' || k.sql || E'\\n', 'UTF8'),
    g.i + 1, g.i * 96, decode(md5(g.i::text), 'hex'), NULL, s.id, %(file)s
FROM (SELECT i, %(start)s::timestamptz + i * %(step_us)s * interval '1 microsecond' AS ts,
             abs(hashint8(i)::bigint) %% 1000 AS r,
             {tables}[1 + abs(hashint8(i + 7)::bigint) %% {ntables}] AS name,
             (i / {block}) * {interleaved} + i %% {interleaved} + 1 AS session
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i) AS g
JOIN ingest_session s ON s.id = g.session
CROSS JOIN LATERAL (SELECT s.database || '.' || g.name AS qualified) AS q
CROSS JOIN LATERAL (SELECT
    CASE WHEN r < 640 THEN 'SELECT' WHEN r < 760 THEN 'INSERT' WHEN r < 860 THEN 'UPDATE'
         WHEN r < 892 THEN 'DELETE' WHEN r < 960 THEN 'SET' WHEN r < 970 THEN 'BEGIN'
         WHEN r < 980 THEN 'COMMIT' WHEN r < 995 THEN 'SHOW' WHEN r < 998 THEN 'ALTER TABLE'
         WHEN r < 999 THEN 'TRUNCATE' ELSE 'DROP TABLE' END AS type,
    CASE WHEN r < 892 OR r BETWEEN 995 AND 998 THEN ARRAY[q.qualified]::varchar[]
         WHEN r = 999 THEN ARRAY[q.qualified || '_tmp']::varchar[] ELSE '{{}}'::varchar[] END AS tables,
    (r BETWEEN 760 AND 891 OR r >= 998) AS destructive,
    CASE WHEN r BETWEEN 890 AND 891 THEN '{{no_where}}'::varchar[]
         WHEN r BETWEEN 892 AND 959 AND g.i %% 1000003 = 0 THEN '{{anti_forensic}}'::varchar[]
         ELSE '{{}}'::varchar[] END AS flags,
    CASE WHEN r < 640 THEN 'SELECT id, total, status FROM ' || g.name || ' WHERE id = ' || g.i %% 100000
         WHEN r < 760 THEN 'INSERT INTO ' || g.name || ' (customer_id, total) VALUES ('
                           || g.i %% 5000 || ', ' || (g.i %% 9999) / 100.0 || ')'
         WHEN r < 860 THEN 'UPDATE ' || g.name || ' SET status = ''shipped'' WHERE id = ' || g.i %% 100000
         WHEN r < 890 THEN 'DELETE FROM ' || g.name || ' WHERE id = ' || g.i %% 100000
         WHEN r < 892 THEN 'DELETE FROM ' || g.name
         WHEN r < 960 AND g.i %% 1000003 = 0 THEN 'SET GLOBAL general_log = OFF'
         WHEN r < 960 THEN 'SET NAMES ''utf8mb4'''
         WHEN r < 970 THEN 'BEGIN' WHEN r < 980 THEN 'COMMIT' WHEN r < 995 THEN 'SHOW TABLES'
         WHEN r < 998 THEN 'ALTER TABLE ' || g.name || ' ADD COLUMN c' || g.i || ' INT'
         WHEN r < 999 THEN 'TRUNCATE TABLE ' || g.name
         ELSE 'DROP TABLE ' || g.name || '_tmp' END AS sql) AS k
"""

# The wide rows made above, moved as the store writes them (issue 22): each distinct statement once
# into the dictionary, the events as narrow rows pointing to it (ingest migration 0023).
MOVE_SQL = """
UPDATE bench_wide
SET key = ingest_statement_key(database, statement_type, tables, destructive, fingerprint, sql);
INSERT INTO ingest_statement (id, key, database, statement_type, tables, destructive, fingerprint, sql)
SELECT DISTINCT ON (key) ingest_statement_id(key, 0), key, database, statement_type, tables, destructive,
    fingerprint, sql FROM bench_wide ORDER BY key
ON CONFLICT (id) DO NOTHING;  -- (a key whose first id is taken: its rows are not moved, and counted)
INSERT INTO ingest_event_row (occurred_at, server, connection_id, "user", host, ip, command, statement_type,
    tables, destructive, flags, rows_affected, status, raw, line, byte_offset, record_hash, ingest_run_id,
    session_id, source_file_id, statement_id)
SELECT w.occurred_at, w.server, w.connection_id, w."user", w.host, w.ip, w.command, w.statement_type,
    w.tables, w.destructive, w.flags,
    w.rows_affected, w.status, w.raw, w.line, w.byte_offset, w.record_hash, w.ingest_run_id, w.session_id,
    w.source_file_id, s.id
FROM bench_wide w JOIN ingest_statement s ON s.id = ingest_statement_id(w.key, 0) AND s.key = w.key
ORDER BY w.occurred_at;
TRUNCATE bench_wide;
"""

SESSIONS_SQL = """
INSERT INTO ingest_session (id, key, server, boot, connection_id, "user", host, ip, program, os_user,
    database, started_at, ended_at, attributed)
SELECT n + 1, 'db' || (n %% 4 + 1) || '/boot1/' || n, 'db' || (n %% 4 + 1), 'boot1', n,
    CASE WHEN n %% 97 = 0 THEN (ARRAY['alice', 'bob', 'carol', 'dave'])[1 + n %% 4] ELSE 'app' || n %% 40 END,
    '10.0.' || n %% 20 || '.' || n %% 7, '10.0.' || n %% 20 || '.' || n %% 7, NULL, NULL,
    {databases}[1 + n %% {ndatabases}],
    %(start)s::timestamptz + ((n / {interleaved}) * {block} + n %% {interleaved}) * %(step_us)s
        * interval '1 microsecond',
    %(start)s::timestamptz + ((n / {interleaved}) * {block} + n %% {interleaved} + {block} - {interleaved})
        * %(step_us)s * interval '1 microsecond',
    true
FROM generate_series(0::bigint, %(sessions)s - 1) AS n
"""


def generate(db: str, events: int) -> None:
    admin_sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    admin_sql(f'CREATE DATABASE "{db}"')
    setup_django(db)
    from django.core.management import call_command
    from django.db import connection, transaction

    from ingest.models import Gap, Source, SourceFile
    from ingest.partitions import ensure_event_partitions, month_of

    call_command("migrate", verbosity=0)
    ensure_event_partitions({month_of(START + timedelta(days=d)) for d in range(DAYS + 1)})
    source = Source.objects.create(name="bench fleet", kind="file", path="/var/log/mysql/*.log", server="db1")
    sf = SourceFile.objects.create(source=source, path="/var/log/mysql/general.log", size=events * 96,
                                   head_sha256="0" * 64, sha256="0" * 64, bytes_read=events * 96)  # fmt: skip
    block = SESSION_LENGTH * INTERLEAVED
    sessions = -(-events // block) * INTERLEAVED
    step_us = DAYS * 86400 * 1_000_000 // events
    params = {"start": START, "step_us": step_us, "file": sf.pk, "sessions": sessions}
    shape = {"block": block, "interleaved": INTERLEAVED}
    began = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute("SET synchronous_commit = off")
        sql = SESSIONS_SQL.format(databases=_array(DATABASES), ndatabases=len(DATABASES), **shape)
        cur.execute(sql, params)
        sql = EVENTS_SQL.format(tables=_array(TABLES), ntables=len(TABLES), **shape)
        cur.execute("CREATE TEMP TABLE bench_wide AS SELECT * FROM ingest_event WITH NO DATA")
        cur.execute("ALTER TABLE bench_wide ADD COLUMN key bytea")
        for first in range(0, events, CHUNK):
            with transaction.atomic():
                cur.execute(sql, {**params, "first": first, "last": min(first + CHUNK, events) - 1})
                cur.execute(MOVE_SQL)
            done = min(first + CHUNK, events)
            rate = done / (time.perf_counter() - began)
            print(f"\r{done:,} events ({rate:,.0f}/s)", end="", flush=True)
        print()
        for day in (3, 11, 19, 26):
            at = START + timedelta(days=day, hours=2)
            Gap.objects.create(
                server="db2", reason="logging_off", started_at=at, ended_at=at + timedelta(hours=3),
                detail="SET GLOBAL general_log = OFF", source_file=sf, line=1, byte_offset=day,
            )  # fmt: skip
        cur.execute("VACUUM (ANALYZE) ingest_event_row")
        cur.execute("VACUUM (ANALYZE) ingest_statement")
        cur.execute("VACUUM (ANALYZE) ingest_session")
        cur.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        size = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM ingest_event_row")
        stored = cur.fetchone()[0]
    print(f"generated {stored:,} events of {events:,} in {time.perf_counter() - began:.0f} s; {db} is {size}")


def machine() -> dict:
    import psycopg

    with psycopg.connect(f"{PG}/postgres") as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        shared = conn.execute("SHOW shared_buffers").fetchone()[0]
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")), "?")
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    mem = next(int(ln.split()[1]) // 1024 // 1024 for ln in meminfo if ln.startswith("MemTotal"))
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem, "postgresql": version,
            "shared_buffers": shared, "python": platform.python_version()}  # fmt: skip


def backend_cpu() -> tuple[int, float]:
    """The Django connection's PostgreSQL backend (same machine): its pid and CPU ms so far."""
    from django.db import connection

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return pid, (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def pages() -> list[tuple[str, str, dict[str, str]]]:
    from django.db import connection

    day = START + timedelta(days=17)
    one_day = f"since={day:%Y-%m-%dT%H:%M}&until={day + timedelta(days=1):%Y-%m-%dT%H:%M}&tz=UTC"
    with connection.cursor() as cur:
        cur.execute(
            "SELECT id, session_id FROM ingest_event WHERE occurred_at >= %s AND destructive"
            " ORDER BY occurred_at LIMIT 1",
            [day],
        )
        event, session = cur.fetchone()
    htmx = {"HTTP_HX_REQUEST": "true"}
    return [
        ("explorer: one table, one day", f"/events/?table=shop.orders&{one_day}", {}),
        ("explorer: same, htmx partial", f"/events/?table=shop.orders&{one_day}", htmx),
        ("explorer: one table (bare name), one day", f"/events/?table=orders&{one_day}", {}),
        ("explorer: destructive, one day", f"/events/?destructive=true&{one_day}", {}),
        ("explorer: one user, one day", f"/events/?user=bob&{one_day}", {}),
        ("explorer: no filter (30 days)", "/events/", {}),
        (
            "explorer: sorted by server, one table, one day",
            f"/events/?table=shop.orders&sort=server&{one_day}",
            {},
        ),
        ("explorer: sorted by account, one day", f"/events/?sort=user&{one_day}", {}),
        ("explorer: sorted by account, no filter (30 days)", "/events/?sort=user", {}),
        # A From before the first event: every one of the 10 million sorted (what the API does
        # unfiltered; the explorer without a From sorts the chart's day and redirects there).
        ("explorer: sorted by account, From before all", "/events/?sort=user&since=2026-09-30T00:00", {}),
        ("explorer: oldest first, no filter (30 days)", "/events/?sort=time", {}),
        ("event detail", f"/events/{event}/", {}),
        ("session (200 statements)", f"/sessions/{session}/", {}),
        ("sessions list", "/sessions/", {}),
        ("table history: shop.orders", "/tables/shop.orders/", {}),
        ("tables list", "/tables/", {}),
        ("tables list, search 'ord'", "/tables/?q=ord", {}),
        ("dashboard", "/", {}),
    ]


def measure(db: str, runs: int) -> None:
    setup_django(db)
    from django.contrib.auth import get_user_model
    from django.test import Client

    from investigations.query.tables import tables_seen_refresh
    from investigations.roles import Role, set_role

    tables_seen_refresh()  # as the background task leaves it (timed below)
    user, _ = get_user_model().objects.get_or_create(username="bench-investigator")
    set_role(user, Role.INVESTIGATOR)
    client = Client()
    client.force_login(user)
    results = []
    for name, url, headers in pages():
        # (follow: a page that redirects, as a column sort without a From does, is timed with the
        # page it redirects to, as a browser would wait for both)
        response = client.get(url, follow=True, **headers)  # warm: caches, connections, the page cache
        assert response.status_code == 200, (url, response.status_code, response.content[:500])
        times, cpu = [], []  # wall ms; CPU ms of this process and of PostgreSQL's backend
        for _ in range(runs):
            pid, pg = backend_cpu()
            began, py = time.perf_counter(), time.process_time()
            response = client.get(url, follow=True, **headers)
            times.append((time.perf_counter() - began) * 1000)
            py = (time.process_time() - py) * 1000
            after, pg_after = backend_cpu()
            cpu.append((py + pg_after - pg, py, pg_after - pg) if after == pid else (py, py, 0.0))
            assert response.status_code == 200
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        best = min(cpu)  # the least CPU of the runs (load moves wall times, CPU much less)
        results.append({"page": name, "url": url, "runs": runs, "median_ms": statistics.median(times),
                        "p95_ms": p95, "bytes": len(response.content), "cpu_ms": best[0],
                        "python_cpu_ms": best[1], "postgres_cpu_ms": best[2]})  # fmt: skip
        print(f"{name:45} median {statistics.median(times):7.1f} ms  p95 {p95:7.1f} ms  CPU"
              f" {best[0]:7.1f} ms (python {best[1]:.1f}, postgres {best[2]:.1f})", flush=True)  # fmt: skip
    from ingest.models import Event
    from investigations.query.tables import tables_seen_refresh

    began = time.perf_counter()
    names = tables_seen_refresh()  # the Tables page's list, rebuilt in the background
    rebuild_ms = (time.perf_counter() - began) * 1000
    print(f"{'tables list rebuild (background task)':45} once   {rebuild_ms:7.1f} ms  ({names} names)")
    results.append({"page": "tables list rebuild (background task, once)", "url": "", "runs": 1,
                    "median_ms": rebuild_ms, "p95_ms": rebuild_ms, "bytes": 0})  # fmt: skip
    count = Event.objects.count()
    OUT.mkdir(exist_ok=True)
    report = {"events": count, "machine": machine(), "results": results,
              "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
    (OUT / "explorer.json").write_text(json.dumps(report, indent=2))
    print(f"\n{count:,} events; {report['machine']}\n")
    print("| page | median | p95 | CPU (python + postgres) |\n| --- | ---: | ---: | ---: |")
    for r in results:
        cpu = f"{r['cpu_ms']:.0f} ms" if "cpu_ms" in r else ""
        print(f"| {r['page']} | {r['median_ms']:.0f} ms | {r['p95_ms']:.0f} ms | {cpu} |")


# The event table's indexes as the ingest app makes them (migrations 0002 and 0008), and those the
# investigation pages add (investigations/migrations/0003 and 0004), on a scratch copy.
INGEST_INDEXES = [
    "CREATE INDEX ON {t} (id)",
    "CREATE UNIQUE INDEX ON {t} (occurred_at, record_hash) NULLS NOT DISTINCT",
    "CREATE INDEX ON {t} USING brin (occurred_at)",
    "CREATE INDEX ON {t} (occurred_at DESC) WHERE destructive",
    "CREATE INDEX ON {t} (session_id, occurred_at)",
]
INVESTIGATION_INDEXES = [
    "CREATE INDEX ON {t} USING gin (tables)",
    "CREATE INDEX ON {t} (occurred_at DESC) WHERE flags @> '{{anti_forensic}}'::varchar(40)[]",
    "CREATE INDEX ON {t} (occurred_at)"
    " WHERE destructive AND statement_type IN ('RENAME TABLE', 'ALTER TABLE')",
    "CREATE INDEX ON {t} USING gin (tables) WHERE destructive",
]


def indexcost(db: str, rows: int, runs: int = 3) -> None:
    """COPY `rows` events (binary, time order, as the store writer sends them) into a scratch
    partitioned table: with the ingest indexes, then with the investigation ones too."""
    import psycopg

    with psycopg.connect(f"{PG}/{db}", autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS bench_copy")
            cur.execute("CREATE TABLE bench_copy (LIKE ingest_event) PARTITION BY RANGE (occurred_at)")
            cur.execute(
                "CREATE TABLE bench_copy_p PARTITION OF bench_copy FOR VALUES FROM (MINVALUE) TO (MAXVALUE)"
            )
            data = bytearray()
            select = f"SELECT * FROM ingest_event ORDER BY occurred_at LIMIT {rows}"  # noqa: S608 (an int)
            with cur.copy(f"COPY ({select}) TO STDOUT (FORMAT binary)") as copy:
                for chunk in copy:
                    data += chunk
        figures = {}
        for label, indexes in (
            ("ingest indexes", INGEST_INDEXES),
            ("+ investigation indexes", INVESTIGATION_INDEXES),
        ):
            for sql in indexes:
                conn.execute(sql.format(t="bench_copy"))
            times = []
            for _ in range(runs):
                conn.execute("TRUNCATE bench_copy")
                began = time.perf_counter()
                with conn.cursor() as cur, cur.copy("COPY bench_copy FROM STDIN (FORMAT binary)") as copy:
                    copy.write(bytes(data))
                conn.execute("VACUUM bench_copy")  # GIN's pending list is merged here: part of the cost
                times.append(time.perf_counter() - began)
            figures[label] = statistics.median(times)
            print(
                f"{label:28} {rows / figures[label]:>9,.0f} rows/s (median of {runs}: {figures[label]:.2f} s)"
            )
        conn.execute("DROP TABLE bench_copy")
    first, second = figures.values()
    print(f"the investigation indexes cost {100 * (second / first - 1):.0f}% more COPY time")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["generate", "measure", "indexcost", "drop"])
    ap.add_argument("--db", default="auditweb_bench10m")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    if args.command == "generate":
        generate(args.db, args.events)
    elif args.command == "measure":
        measure(args.db, args.runs)
    elif args.command == "indexcost":
        indexcost(args.db, 1_000_000)
    else:
        admin_sql(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
