"""Benchmark: a case's PDF report at 2,500, 5,000 and 10,000 evidence events: time and peak RSS.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/auditweb_reportbench \\
        flock -x /tmp/auditweb-cpu.lock .venv/bin/python bench/report_bench.py [--sizes 2500,5000,10000]

Needs a database of its own (it migrates it and fills it). Writes a general log with
tests/logwriter.py, ingests it, pins the first N statements of it to a case of each size, then
generates each report in a fresh Python process: its RSS once Django and reportlab are loaded,
its peak RSS while it writes the report (VmHWM, reset just before), the wall time of
`report_generate` (queries, layout, writing, hashing), pages and bytes. CSV and JSON of the
largest case are measured the same way. Flat memory: the peak does not grow with the events
beyond what the finished pages take (reportlab keeps them, compressed, until the file is saved).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from ingest.models import Event  # noqa: E402
from ingest.pipeline import ingest_file, source_for_path  # noqa: E402
from investigations.cases import case_create  # noqa: E402
from investigations.models import Evidence, Report  # noqa: E402
from tests.logwriter import GeneralLogWriter  # noqa: E402


def status_mib(field: str) -> float:
    """VmRSS (resident now) or VmHWM (its peak) of this process, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> None:
    """Start VmHWM again from the resident size now (Linux: 5 > /proc/self/clear_refs), so the
    peak measured is the report's, not that of loading Django and the SQL classifier."""
    Path("/proc/self/clear_refs").write_text("5")


def generate(case_id: int, fmt: str) -> dict[str, object]:
    """In this (fresh) process: one report, measured."""
    from investigations.reports import pdf_report  # noqa: F401 (loaded before the baseline)
    from investigations.reports.generate import report_generate

    user = get_user_model().objects.get(username="bench-report")
    report = Report.objects.create(
        case_id=case_id, format=fmt, generated_by=user, total=Evidence.objects.filter(case_id=case_id).count()
    )
    before = status_mib("VmRSS")
    reset_peak()
    start = time.perf_counter()
    done = report_generate(report.pk)
    seconds = time.perf_counter() - start
    peak = status_mib("VmHWM")
    assert done is not None and done.status == "done", done and done.error
    pages = None
    if fmt == "pdf":
        info = subprocess.run(["pdfinfo", str(done.path)], capture_output=True, text=True).stdout
        pages = next((int(line.split()[1]) for line in info.splitlines() if line.startswith("Pages:")), None)
    return {
        "events": done.total,
        "format": fmt,
        "seconds": round(seconds, 2),
        "rss_before_mib": round(before, 1),
        "peak_rss_mib": round(peak, 1),
        "pages": pages,
        "bytes": done.size,
    }


def prepare(sizes: list[int]) -> list[int]:
    """Cases of each size (made once; a later run reuses them)."""
    user, _ = get_user_model().objects.get_or_create(username="bench-report")
    needed = max(sizes)
    if Event.objects.filter(command="Query").count() < needed:
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "general.log"
            writer = GeneralLogWriter(log)
            writer.write(int(needed * 1.3))
            writer.close()
            ingest_file(log, source=source_for_path(log, server="bench", fmt="general-log", tz="UTC"))
    events = list(Event.objects.filter(command="Query").order_by("occurred_at", "id")[:needed])
    cases = []
    for size in sizes:
        title = f"bench {size}"
        case = case_create(user=user, title=title)
        Evidence.objects.bulk_create(
            Evidence(
                case=case,
                event=e,
                event_occurred_at=e.occurred_at,
                event_record_hash=bytes(e.record_hash),
                note=f"pinned for the benchmark ({n})" if n % 10 == 0 else "",
                pinned_by=user,
            )
            for n, e in enumerate(events[:size])
        )
        cases.append(case.pk)
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2500,5000,10000")
    ap.add_argument("--generate", type=int, help=argparse.SUPPRESS)  # the child: a case id
    ap.add_argument("--format", default="pdf", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        print(json.dumps(generate(args.generate, args.format)))
        return 0
    call_command("migrate", verbosity=0)
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = [(case_id, "pdf") for case_id in prepare(sizes)]
    runs += [(runs[-1][0], "csv"), (runs[-1][0], "json")]
    print("| events | format | time | RSS before | peak RSS | pages | size |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for case_id, fmt in runs:
        child = [sys.executable, __file__, "--generate", str(case_id), "--format", fmt]
        out = (
            subprocess.run(child, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        )
        r = json.loads(out)
        print(
            f"| {r['events']:,} | {fmt.upper()} | {r['seconds']} s | {r['rss_before_mib']} MiB | "
            f"{r['peak_rss_mib']} MiB | {r['pages'] or '-'} | {r['bytes'] / 2**20:.1f} MiB |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
