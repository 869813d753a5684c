"""Benchmark: ingestion of every file format, on files of at least 100 MB, events/s and peak memory.

    .venv/bin/python bench/formats_bench.py [--log bench/out/slap-general.log] [--mb 100]

The traffic is real: the general log that bench/genlog_bench.py makes with mariadb-slap
against the local MariaDB (200,000 mixed statements from 50 connections). Its events are
written out again in each format's documented layout (MariaDB server_audit, MySQL
Enterprise JSON one record a line, Percona XML and CSV), repeated with the clock moved
on a day per copy until the file holds at least --mb MB. Each file is then ingested with
`manage.py ingest --format FORMAT` into a scratch PostgreSQL database, and again at half
the size, to show that memory does not grow with the file. Results: a Markdown table and
bench/out/formats.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from xml.sax.saxutils import quoteattr

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out"
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")

Row = tuple  # (time, connection id, user, host, command, sql)


def events(log: Path) -> list[Row]:
    """The statements and connection events of the real log, attributed."""
    from ingest.normalize import SessionTracker
    from ingest.parsers import general_log

    rows = []
    with log.open("rb") as f:
        for e in SessionTracker("bench").process(general_log.parse(f)):
            if hasattr(e, "command") and e.command in ("Connect", "Query", "Quit") and e.occurred_at:
                who = (e.user or "root", e.host or "127.0.0.1")
                rows.append((e.occurred_at, e.connection_id, *who, e.command, e.sql))
    return rows


def server_audit(r: Row, n: int) -> str:
    when, conn, user, host, command, sql = r
    op = {"Connect": "CONNECT", "Quit": "DISCONNECT"}.get(command, "QUERY")
    obj = (
        "'" + sql.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"
        if op == "QUERY"
        else ""
    )
    return f"{when:%Y%m%d %H:%M:%S},bench,{user},{host},{conn},{n},{op},mysqlslap,{obj},0\n"


def enterprise_json(r: Row, n: int) -> str:
    when, conn, user, host, command, sql = r
    o: dict = {"timestamp": f"{when:%Y-%m-%d %H:%M:%S}", "id": n, "connection_id": conn,
               "account": {"user": user, "host": host},
               "login": {"user": user, "os": "", "ip": host, "proxy": ""}}  # fmt: skip
    if command == "Query":
        o |= {"class": "general", "event": "status",
              "general_data": {"command": "Query", "sql_command": "", "query": sql, "status": 0}}  # fmt: skip
    else:
        o |= {"class": "connection", "event": "connect" if command == "Connect" else "disconnect",
              "connection_data": {"connection_type": "tcp/ip", "status": 0, "db": "mysqlslap"}}  # fmt: skip
    return json.dumps(o) + ",\n"


def percona_xml(r: Row, n: int) -> str:
    when, conn, user, host, command, sql = r
    who = f"{user}[{user}] @ {host} [{host}]" if command == "Query" else user
    text = f" SQLTEXT={quoteattr(sql)}" if command == "Query" else ""
    return (
        f'<AUDIT_RECORD NAME="{command}" RECORD="{n}_bench" TIMESTAMP="{when:%Y-%m-%dT%H:%M:%S} UTC"'
        f' CONNECTION_ID="{conn}" STATUS="0" USER={quoteattr(who)} HOST="{host}" IP="{host}"'
        f' DB="mysqlslap"{text}/>\n'
    )


def percona_csv(r: Row, n: int) -> str:
    when, conn, user, host, command, sql = r
    stamp = f"{when:%Y-%m-%dT%H:%M:%S} UTC"
    if command == "Query":
        quoted = '"' + sql.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        return (f'"Query","{n}_bench","{stamp}","select","{conn}",0,{quoted},'
                f'"{user}[{user}] @ {host} [{host}]","{host}","","{host}","mysqlslap"\n')  # fmt: skip
    return (
        f'"{command}","{n}_bench","{stamp}",{conn},0,"{user}","{user}","","","{host}","{host}","mysqlslap"\n'
    )


FORMATS: dict[str, tuple[Callable[[Row, int], str], str, str]] = {
    # format: (one record, file head, file tail)
    "mariadb-audit": (server_audit, "", ""),
    "json-audit": (enterprise_json, "", ""),
    "xml-audit": (percona_xml, '<?xml version="1.0" encoding="utf-8"?>\n<AUDIT>\n', "</AUDIT>\n"),
    "audit-csv": (percona_csv, "", ""),
}


def write(path: Path, fmt: str, rows: list[Row], min_bytes: int) -> int:
    record, head, tail = FORMATS[fmt]
    written = count = copy = 0
    with path.open("w", encoding="utf-8", errors="surrogateescape") as out:
        out.write(head)
        while written < min_bytes:
            shift = timedelta(days=copy)
            for r in rows:
                text = record((r[0] + shift, *r[1:]), count)
                out.write(text)
                written += len(text)
                count += 1
            copy += 1
        out.write(tail)
    return count


def ingest(path: Path, fmt: str, python: str) -> dict:
    db = f"auditweb_formats_{os.getpid()}"
    subprocess.run(["psql", f"{PG}/postgres", "-qc", f'CREATE DATABASE "{db}"'], check=True)
    env = dict(os.environ, DATABASE_URL=f"{PG}/{db}", SECRET_KEY="bench", DEBUG="0")
    try:
        subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
        start = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-f", "%M", python, "manage.py", "ingest",
             "--format", fmt, "--server", "b", str(path)],
            cwd=REPO, env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        count = subprocess.run(
            ["psql", f"{PG}/{db}", "-tAc", "SELECT count(*) FROM ingest_event"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        return {"seconds": seconds, "events": int(count), "peak_rss_mib": int(proc.stderr.split()[-1]) / 1024,
                "summary": proc.stdout.strip().splitlines()[-1]}  # fmt: skip
    finally:
        subprocess.run(["psql", f"{PG}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, default=OUT / "slap-general.log")
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--formats", nargs="*", default=list(FORMATS))
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    args = ap.parse_args()
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    if not args.log.exists():
        print(f"{args.log} is missing: run bench/genlog_bench.py first (it makes the log)", file=sys.stderr)
        return 1
    rows = events(args.log)
    results = {}
    for fmt in args.formats:
        sizes = {}
        for label, mb in (("full", args.mb), ("half", args.mb // 2)):
            path = OUT / f"formats-{fmt}-{label}.log"
            records = write(path, fmt, rows, mb << 20)
            run = ingest(path, fmt, args.python)
            run |= {"bytes": path.stat().st_size, "records": records}
            sizes[label] = run
            path.unlink()
        results[fmt] = sizes
        full, half = sizes["full"], sizes["half"]
        own = full["summary"].rsplit(", ", 1)[-1].rstrip(".")  # the command's own rate, from its summary
        print(f"| {fmt} | {full['bytes'] / 1e6:,.0f} MB | {full['events']:,} | "
              f"{full['events'] / full['seconds']:,.0f} events/s | {own} | {full['peak_rss_mib']:.0f} MiB "
              f"(half the file: {half['peak_rss_mib']:.0f} MiB) |", flush=True)  # fmt: skip
    (OUT / "formats.json").write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
