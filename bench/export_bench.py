"""Benchmark: the NDJSON export (/api/v1/events/export.ndjson), rows/s and memory, at two sizes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/auditweb_export \\
        .venv/bin/python bench/export_bench.py [--records 200000]

Needs a database of its own (it migrates it and fills it). Writes a general log of `--records`
records (and one of half as many) with tests/logwriter.py, ingests them under two server
labels, then streams the export of each server through Django's test client (the view, its
server-side cursor and the serializer; no HTTP socket), counting lines and bytes. Peak Python
memory is measured with tracemalloc over the streaming: it must not grow with the rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from ingest.pipeline import ingest_file, source_for_path  # noqa: E402
from investigations.models import api_token_create  # noqa: E402
from tests.logwriter import GeneralLogWriter  # noqa: E402


def export(client: APIClient, server: str, schema: str) -> tuple[int, int, float, float]:
    """(lines, bytes, seconds, peak MiB of Python memory) of one export: timed in one run, its
    memory traced in another (tracemalloc slows Python down several times)."""
    start = time.perf_counter()
    lines, size = _stream(client, server, schema)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    _stream(client, server, schema)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return lines, size, seconds, peak


def _stream(client: APIClient, server: str, schema: str) -> tuple[int, int]:
    response = client.get("/api/v1/events/export.ndjson", {"server": server, "schema": schema})
    lines = size = 0
    for chunk in response.streaming_content:
        lines += chunk.count(b"\n")
        size += len(chunk)
    return lines, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    args = ap.parse_args()
    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-export")
    _, key = api_token_create(user=user)
    client = APIClient(HTTP_HOST="127.0.0.1")  # a host ALLOWED_HOSTS knows
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, count in (("half", args.records // 2), ("full", args.records)):
            log = Path(tmp) / f"{label}.log"
            writer = GeneralLogWriter(log)
            writer.write(count)
            writer.close()
            server = f"export-{label}-{os.getpid()}"
            ingest_file(log, source=source_for_path(log, server=server, fmt="general-log", tz="UTC"))
            for schema in ("auditweb", "ecs"):
                lines, size, seconds, peak = export(client, server, schema)
                rate = lines / seconds
                print(f"| {label} | {schema} | {lines:,} | {size / 1e6:,.0f} MB | {rate:,.0f} rows/s "
                      f"| {peak:.1f} MiB |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
