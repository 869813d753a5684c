"""Benchmark: general query log ingestion against pt-query-digest, on one real log, in one run.

    .venv/bin/python bench/genlog_bench.py [--log FILE] [--queries 200000] [--concurrency 50]

Without --log it first makes the log the way DBAs benchmark: mariadb-slap against
the local MariaDB (root, no password, 127.0.0.1:3306) with general_log on.
Then it measures, on that same file:
  1. a bare Python read-and-split of every line (the floor for any Python parser);
  2. our parser alone (ingest.parsers.general_log), lines/s and records/s;
  3. parser + session tracker + classifier (no database);
  4. our full ingest (`manage.py ingest` into a scratch PostgreSQL database), events/s
     and the peak memory of that process, on the file and on the file twice over
     (memory must not grow with the size of the file);
  5. `pt-query-digest --type genlog --no-report` (Debian's percona-toolkit), lines/s.
It prints a Markdown table of rates and ratios and writes bench/out/genlog.json.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out"
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
LOCK = "/tmp/auditweb-mariadb.lock"


def mariadb(sql: str) -> str:
    return subprocess.run(
        ["mariadb", "-h127.0.0.1", "-uroot", "-N", "-B", "-e", sql],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def make_log(queries: int, concurrency: int) -> Path:
    """A general log of a mixed mariadb-slap load. MariaDB writes it as its own user, so to /tmp."""
    target = Path("/tmp/auditweb-bench-general.log")
    target.unlink(missing_ok=True)
    # The server is shared with the live tests and fixture scripts, which change its logging
    # too: hold their lock while the log is on (released when this process ends).
    lock = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    before = mariadb("SELECT @@general_log_file").split()[-1]
    mariadb(f"SET GLOBAL general_log_file = '{target}'; SET GLOBAL general_log = ON")
    try:
        subprocess.run(
            ["mariadb-slap", "-h127.0.0.1", "-uroot", f"--concurrency={concurrency}", "--auto-generate-sql",
             "--auto-generate-sql-load-type=mixed", f"--number-of-queries={queries}", "--iterations=1"],
            check=True, capture_output=True,
        )  # fmt: skip
    finally:
        mariadb(f"SET GLOBAL general_log = OFF; SET GLOBAL general_log_file = '{before}'")
        os.close(lock)
    copy = OUT / "slap-general.log"
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(target, copy)
    return copy


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def bare_split(path: Path) -> int:
    n = 0
    with path.open("rb") as f:
        for line in f:
            line.split(b"\t")
            n += 1
    return n


def parser_only(path: Path) -> int:
    from ingest.parsers import general_log

    n = 0
    with path.open("rb", buffering=1 << 20) as f:
        for _ in general_log.parse(f):
            n += 1
    return n


def sessions_only(path: Path) -> int:
    """Parser + session tracker, without the classifier: what classification adds is the rest."""
    from ingest.normalize import SessionTracker
    from ingest.parsers import general_log

    n = 0
    with path.open("rb", buffering=1 << 20) as f:
        for _ in SessionTracker("bench").process(general_log.parse(f)):
            n += 1
    return n


def normalize_only(path: Path) -> int:
    from ingest.normalize import SessionTracker, classify_events
    from ingest.parsers import general_log

    n = 0
    with path.open("rb", buffering=1 << 20) as f:
        for _ in classify_events(SessionTracker("bench").process(general_log.parse(f))):
            n += 1
    return n


def full_ingest(path: Path, python: str) -> dict:
    db = f"auditweb_bench_{os.getpid()}"
    subprocess.run(["psql", f"{PG}/postgres", "-qc", f'CREATE DATABASE "{db}"'], check=True)
    env = dict(os.environ, DATABASE_URL=f"{PG}/{db}", SECRET_KEY="bench", DEBUG="0")
    try:
        subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-f", "%M", python, "manage.py", "ingest", "--server", "bench", str(path)],
            cwd=REPO, env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        del before
        peak_kib = int(proc.stderr.strip().splitlines()[-1])
        count = subprocess.run(
            ["psql", f"{PG}/{db}", "-tAc", "SELECT count(*) FROM ingest_event"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        own_rate = re.search(r"([\d,]+) events/s", proc.stdout)
        return {
            "seconds": seconds,
            # The command's own figure: from its first file opened to its summary (no start-up).
            "reported_events_per_s": int(own_rate.group(1).replace(",", "")) if own_rate else None,
            "events": int(count),
            "peak_rss_mib": peak_kib / 1024,
            "summary": proc.stdout,
        }
    finally:
        subprocess.run(["psql", f"{PG}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'])


def pt_query_digest(path: Path) -> float | None:
    exe = shutil.which("pt-query-digest")
    if exe is None:
        return None
    start = time.perf_counter()
    subprocess.run([exe, "--type", "genlog", "--no-report", str(path)], check=True, capture_output=True)
    return time.perf_counter() - start


def machine() -> dict:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    pg = subprocess.run(
        ["psql", f"{PG}/postgres", "-tAc", "SHOW server_version"], capture_output=True, text=True
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "postgresql": pg.stdout.strip(),
        "mariadb": mariadb("SELECT VERSION()"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path)
    ap.add_argument("--queries", type=int, default=200_000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")

    log = args.log or make_log(args.queries, args.concurrency)
    size = log.stat().st_size
    double = OUT / "slap-general-x2.log"
    with double.open("wb") as out:
        for _ in range(2):
            out.write(log.read_bytes())

    bare_s, lines = timed(lambda: bare_split(log))
    parse_s, records = timed(lambda: parser_only(log))
    sessions_s, _ = timed(lambda: sessions_only(log))
    norm_s, _ = timed(lambda: normalize_only(log))
    full = full_ingest(log, args.python)
    full2 = full_ingest(double, args.python)
    pt_s = pt_query_digest(log)

    rates = {
        "bare_lines_per_s": lines / bare_s,
        "parser_lines_per_s": lines / parse_s,
        "parser_records_per_s": records / parse_s,
        "sessions_records_per_s": records / sessions_s,
        "normalize_records_per_s": records / norm_s,
        "full_events_per_s": full["events"] / full["seconds"],
        "pt_query_digest_lines_per_s": (lines / pt_s) if pt_s else None,
    }
    result = {
        "machine": machine(),
        "log": {"path": str(log), "bytes": size, "lines": lines, "records": records},
        "rates": rates,
        "full_ingest": full,
        "full_ingest_x2": full2,
        "pt_query_digest_seconds": pt_s,
    }
    (OUT / "genlog.json").write_text(json.dumps(result, indent=2, default=str))

    def r(x: float | None) -> str:
        return f"{x:,.0f}" if x else "n/a"

    pt_events = (records / pt_s) if pt_s else None
    print(f"log: {log} ({size / 1e6:.1f} MB, {lines:,} lines, {records:,} records)")
    print("| measure | rate | ratio |")
    print("| --- | --- | --- |")
    print(f"| bare read-and-split | {r(rates['bare_lines_per_s'])} lines/s | 1 |")
    print(f"| our parser alone | {r(rates['parser_lines_per_s'])} lines/s | "
          f"{rates['bare_lines_per_s'] / rates['parser_lines_per_s']:.2f}x slower than bare |")  # fmt: skip
    print(f"| parser + sessions | {r(rates['sessions_records_per_s'])} records/s | |")
    slower = sessions_s and norm_s / sessions_s
    classified = r(rates["normalize_records_per_s"])
    print(
        f"| parser + sessions + classifier (+ transactions) | {classified} records/s "
        f"| classification takes {slower:.2f}x the time of parsing and tracking alone |"
    )
    ratio = f"{rates['full_events_per_s'] / pt_events:.2f}x pt-query-digest " if pt_events else ""
    print(f"| full ingest into PostgreSQL | {r(rates['full_events_per_s'])} events/s | {ratio}|")
    own = r(full["reported_events_per_s"])
    print(f"| (the command's own figure, without its start-up) | {own} events/s | |")
    print(f"| pt-query-digest --no-report | {r(rates['pt_query_digest_lines_per_s'])} lines/s, "
          f"{r(pt_events)} records/s | 1 |")  # fmt: skip
    print(f"peak RSS of the ingest: {full['peak_rss_mib']:.0f} MiB for {size / 1e6:.0f} MB, "
          f"{full2['peak_rss_mib']:.0f} MiB for twice that")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
