"""Benchmark: the live pull of mysql.general_log into PostgreSQL, rows/s and peak memory.

    flock /tmp/auditweb-mariadb.lock .venv/bin/python bench/table_bench.py [--log bench/out/slap-general.log]

Needs root on this machine and the local MariaDB (socket /run/mysqld/mysqld.sock, root
without a password). The real mariadb-slap general log of bench/genlog_bench.py is loaded
into the server's mysql.general_log table: with general logging off, the CSV engine's file
is written in the engine's own format (and the table reopened), which takes seconds where
logging 200,000 statements through the server takes most of an hour. Then
`manage.py pull_general_log` pulls the table into a scratch PostgreSQL database, twice
(the second pull must store nothing). Afterwards the table's file and every setting are
put back as they were. Results: a Markdown line and bench/out/table.json.
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
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out"
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
CSV_FILE = Path("/var/lib/mysql/mysql/general_log.CSV")
DSN = "mysql://root@localhost?unix_socket=/run/mysqld/mysqld.sock"


def mariadb(sql: str) -> str:
    return subprocess.run(
        ["mariadb", "-uroot", "-N", "-B", "-e", sql], check=True, capture_output=True, text=True
    ).stdout.strip()


def csv_value(text: str) -> str:
    # The CSV engine (ha_tina) escapes these four with a backslash; everything else goes as is.
    return (
        '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'
    )


def table_file(log: Path) -> tuple[str, int]:
    from ingest.normalize import SessionTracker
    from ingest.parsers import general_log

    lines = []
    with log.open("rb") as f:
        for e in SessionTracker("bench").process(general_log.parse(f)):
            if getattr(e, "occurred_at", None) is None or e.connection_id is None:
                continue
            who = f"{e.user}[{e.user}] @  [{e.host}]" if e.user else "[] @  []"
            when = e.occurred_at.strftime("%Y-%m-%d %H:%M:%S.%f")
            lines.append(f'"{when}",{csv_value(who)},{e.connection_id},1,"{e.command}",{csv_value(e.sql)}\n')
    return "".join(lines), len(lines)


def pull(db: str, python: str) -> dict:
    env = dict(os.environ, DATABASE_URL=f"{PG}/{db}", SECRET_KEY="bench", DEBUG="0")
    start = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", python, "manage.py", "pull_general_log", "--dsn", DSN, "--server", "b"],
        cwd=REPO, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return {"seconds": time.perf_counter() - start, "peak_rss_mib": int(proc.stderr.split()[-1]) / 1024,
            "summary": proc.stdout.strip()}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, default=OUT / "slap-general.log")
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    args = ap.parse_args()
    os.environ.setdefault("SECRET_KEY", "bench")
    text, rows = table_file(args.log)
    settings = mariadb("SELECT @@global.general_log, @@global.log_output").split("\t")
    backup = OUT / "general_log.CSV.backup"
    db = f"auditweb_table_{os.getpid()}"
    mariadb("SET GLOBAL general_log = OFF")
    shutil.copy2(CSV_FILE, backup)
    try:
        CSV_FILE.write_text(text, encoding="utf-8", errors="surrogateescape")
        mariadb("FLUSH TABLES mysql.general_log")
        in_table = int(mariadb("SELECT COUNT(*) FROM mysql.general_log"))
        subprocess.run(["psql", f"{PG}/postgres", "-qc", f'CREATE DATABASE "{db}"'], check=True)
        env = dict(os.environ, DATABASE_URL=f"{PG}/{db}", SECRET_KEY="bench", DEBUG="0")
        subprocess.run([args.python, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
        first, second = pull(db, args.python), pull(db, args.python)
        stored = int(subprocess.run(["psql", f"{PG}/{db}", "-tAc", "SELECT count(*) FROM ingest_event"],
                                    check=True, capture_output=True, text=True).stdout)  # fmt: skip
    finally:
        subprocess.run(["psql", f"{PG}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'])
        shutil.copy2(backup, CSV_FILE)
        backup.unlink()
        mariadb("FLUSH TABLES mysql.general_log")
        mariadb(f"SET GLOBAL log_output = '{settings[1]}'; SET GLOBAL general_log = {settings[0]}")
    result = {"rows_written": rows, "rows_in_table": in_table, "events_stored": stored, "first": first,
              "second": second}  # fmt: skip
    (OUT / "table.json").write_text(json.dumps(result, indent=2))
    print(f"| live pull of mysql.general_log | {in_table:,} rows | {in_table / first['seconds']:,.0f} rows/s "
          f"| {first['peak_rss_mib']:.0f} MiB | second pull: {second['summary']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
