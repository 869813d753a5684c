"""Benchmark: the NDJSON export (/api/v1/events/export.ndjson) of a million events over HTTP, events/s
and the peak memory of the server process, plain and in ECS names.

    flock -x /tmp/auditweb-cpu.lock .venv/bin/python bench/export_bench.py generate --events 1000000
    flock -x /tmp/auditweb-cpu.lock .venv/bin/python bench/export_bench.py measure
    .venv/bin/python bench/export_bench.py drop

`generate` fills a scratch database of its own (`--db`, default auditweb_export1m) with events
made by SQL the way bench/explorer_bench.py makes its 10 million (same shape: 4 servers, 30 days,
sessions of 200 statements), in seconds. `measure` starts gunicorn (one sync worker, as a
deployment would run it, DEBUG off) on `--port`, makes an API token, and for each schema
streams the whole export over a real socket, reading it as fast as it comes and counting lines
and bytes; then reads the worker's peak resident memory (VmHWM in /proc, the high-water mark of
the process's whole life: start-up, imports and the export). A fresh worker for each schema.
`BENCH_PG` (default postgres://postgres@127.0.0.1:5432) names the PostgreSQL server.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import explorer_bench  # noqa: E402


def worker_of(master: int, timeout: float = 30.0) -> int:
    """The pid of gunicorn's one worker (the master's child)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise RuntimeError("gunicorn started no worker")


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def wait_for(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/accounts/login/")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"nothing answered on port {port}")


def stream(port: int, key: str, schema: str) -> tuple[int, int, float]:
    """(lines, bytes, seconds) of one export read to its end."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    began = time.perf_counter()
    headers = {"Authorization": f"Token {key}"}
    conn.request("GET", f"/api/v1/events/export.ndjson?schema={schema}", headers=headers)
    response = conn.getresponse()
    assert response.status == 200, (response.status, response.read()[:500])
    lines = size = 0
    while chunk := response.read(1 << 20):
        lines += chunk.count(b"\n")
        size += len(chunk)
    return lines, size, time.perf_counter() - began


def measure(db: str, port: int) -> None:
    explorer_bench.setup_django(db)

    from ingest.models import Event

    key = explorer_bench.viewer_token("bench-export")
    count = Event.objects.count()
    env = {**os.environ, "DATABASE_URL": f"{explorer_bench.PG}/{db}", "DEBUG": "false",
           "SECRET_KEY": "bench", "ALLOWED_HOSTS": "127.0.0.1"}  # fmt: skip
    print(f"{count:,} events in {db}; {explorer_bench.machine()}")
    print("| schema | events | size | seconds | events/s | peak RSS of the worker |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for schema in ("auditweb", "ecs"):
        server = subprocess.Popen(
            [str(REPO / ".venv/bin/gunicorn"), "auditweb.wsgi", "--workers", "1", "--timeout", "600",
             "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
            cwd=REPO, env=env,
        )  # fmt: skip
        try:
            wait_for(port)
            worker = worker_of(server.pid)
            lines, size, seconds = stream(port, key, schema)
            peak = peak_rss_mib(worker)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        assert lines == count, (lines, count)
        print(f"| {schema} | {lines:,} | {size / 1e6:,.0f} MB | {seconds:.1f} | {lines / seconds:,.0f} "
              f"| {peak:.0f} MiB |", flush=True)  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["generate", "measure", "drop"])
    ap.add_argument("--db", default="auditweb_export1m")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--port", type=int, default=8105)
    args = ap.parse_args()
    if args.command == "generate":
        explorer_bench.generate(args.db, args.events)
    elif args.command == "measure":
        measure(args.db, args.port)
    else:
        explorer_bench.admin_sql(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
