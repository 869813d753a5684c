"""Continuous ingestion with real Celery workers: lag and throughput.

    # steady-state lag: a writer appends LINES_PER_S lines/s for SECONDS while a worker polls
    .venv/bin/python bench/continuous_bench.py lag --seconds 600 --rate 1000
    # throughput over rotated sets of files with 1, then 2 workers
    .venv/bin/python bench/continuous_bench.py throughput --records 200000
    # one big file shared out in 16 MB ranges: 1 worker unsplit, then 1 and 2 workers split
    .venv/bin/python bench/continuous_bench.py throughput --sources 1 --files 1 --records 600000 --chunk-mb 16

Needs DATABASE_URL and REDIS_URL (a database of its own: it migrates it and adds sources).
Workers are started here (`celery -A auditweb worker -B --pool=solo`) on a queue of their own.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db.models import Max  # noqa: E402

from ingest.models import Chunk, Event, IngestRun, Source, Split  # noqa: E402
from tests.logwriter import GeneralLogWriter, rotate_rename  # noqa: E402


def start_workers(n: int, queue: str, tmp: Path, **extra: str) -> list[subprocess.Popen[bytes]]:
    tmp.mkdir(parents=True, exist_ok=True)
    # the bench's logs are in its temporary folder: a root that file sources may read (issue 18)
    roots = ",".join(filter(None, [os.environ.get("AUDITWEB_LOG_ROOTS"), str(tmp.parent)]))
    env = dict(os.environ, CELERY_QUEUE=queue, INGEST_POLL_SECONDS="1", AUDITWEB_LOG_ROOTS=roots, **extra)
    procs = []
    for i in range(n):
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "auditweb",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
        ]
        cmd += [f"--hostname=b{i}-{queue}@%h", "--without-gossip", "--without-mingle"]
        if i == 0:
            cmd += ["-B", f"--schedule={tmp}/beat"]
        log = (tmp / f"worker-{i}.log").open("wb")
        procs.append(
            subprocess.Popen(
                cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )
    return procs


def wait_ready(n: int, tmp: Path) -> None:
    """Until each of the n workers has said it is ready (celery's "ready." line in its log)."""
    deadline = time.time() + 120
    while sum("ready." in p.read_text(errors="replace") for p in tmp.glob("worker-*.log")) < n:
        if time.time() > deadline:
            raise SystemExit(f"the workers did not start; see {tmp}")
        time.sleep(0.1)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        p.wait()


def lag(seconds: int, rate: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="auditweb-lag-"))
    log = tmp / "general.log"
    server = f"bench-lag-{uuid.uuid4().hex[:6]}"
    writer = GeneralLogWriter(log)
    Source.objects.create(
        name=server, path=str(log) + "*", server=server, format="general-log", interval_seconds=1
    )
    procs = start_workers(1, f"bench-{server}", tmp)
    written: list[float] = []  # write time of each record, in order
    samples: list[tuple[float, float]] = []  # (when sampled, newest stored time)
    try:
        start = time.time()
        next_sample = start
        tick = 0.05
        while time.time() - start < seconds:
            due = int((time.time() - start) * rate) - len(written)
            if due > 0:
                now = datetime.now(UTC)
                writer.time = now  # records carry the time they are written at
                writer.write(due)
                written.extend([now.timestamp()] * due)
            if time.time() >= next_sample:
                newest = Event.objects.filter(server=server).aggregate(m=Max("occurred_at"))["m"]
                samples.append((time.time(), newest.timestamp() if newest else 0.0))
                next_sample += 0.25
            time.sleep(tick)
        writer.write(1)  # completes the last record (the parser waits for the next line)
        deadline = time.time() + 60
        while time.time() < deadline:
            newest = Event.objects.filter(server=server).aggregate(m=Max("occurred_at"))["m"]
            samples.append((time.time(), newest.timestamp() if newest else 0.0))
            if newest and newest.timestamp() >= written[-1]:
                break
            time.sleep(0.25)
    finally:
        stop(procs)
    lags: list[float] = []
    j = 0
    for t_w in written:
        while j < len(samples) and samples[j][1] < t_w - 1e-6:
            j += 1
        lags.append(samples[j][0] - t_w if j < len(samples) else float("inf"))
    lags.sort()
    stored = Event.objects.filter(server=server, command__in=["Query", "Connect", "Quit"]).count()
    print(
        f"lines written: {len(written):,} in {seconds} s ({len(written) / seconds:,.0f}/s); "
        f"events stored: {stored:,}"
    )
    for p in (50, 95, 99):
        print(f"lag p{p}: {lags[min(len(lags) - 1, len(lags) * p // 100)]:.2f} s")
    print(f"lag max: {lags[-1]:.2f} s")
    runs = IngestRun.objects.filter(source__server=server)
    print(f"runs: {runs.count()} ({runs.filter(status='failed').count()} failed)")


def throughput(records: int, files: int, sources: int, chunk_mb: int | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="auditweb-tp-"))
    sets = []
    for s in range(sources):
        folder = tmp / f"db{s}"
        folder.mkdir()
        log = folder / "general.log"
        writer = GeneralLogWriter(log)
        for f in range(files):
            writer.write(records // files)
            if f < files - 1:
                rotate_rename(log)
                writer.reopen()
        writer.close()
        sets.append(folder)
    size = sum(p.stat().st_size for folder in sets for p in folder.iterdir())
    print(f"{sources} rotated set(s) of {files} files, {records:,} records each, {size / 1e6:.0f} MB in all")
    configs: list[tuple[int, dict[str, str]]] = [(1, {}), (2, {})]
    if chunk_mb:
        split = {"INGEST_SPLIT_BYTES": "1", "INGEST_CHUNK_BYTES": str(chunk_mb * 1024 * 1024)}
        configs = [(1, {"INGEST_SPLIT_BYTES": "0"}), (1, split), (2, split)]
    for n, extra in configs:
        tag = uuid.uuid4().hex[:6]
        ids = [
            Source.objects.create(
                name=f"tp-{tag}-{i}", path=f"{folder}/general.log*", server=f"tp-{tag}-{i}",
                format="general-log", interval_seconds=3600, enabled=False,
            ).pk
            for i, folder in enumerate(sets)
        ]  # fmt: skip
        procs = start_workers(n, f"bench-tp-{tag}", tmp / tag, **extra)
        wait_ready(n, tmp / tag)  # timed from here: not the workers' start-up
        for pk in ids:
            Source.objects.filter(pk=pk).update(enabled=True)
        start = time.time()
        while True:
            done = Event.objects.filter(server__startswith=f"tp-{tag}-").count()
            if done >= sources * records:  # every record but the last of each set, plus banners
                break
            time.sleep(0.2)
        seconds = time.time() - start
        stop(procs)
        failed = IngestRun.objects.filter(source_id__in=ids, status="failed").count()
        how = "" if not chunk_mb else (" split" if extra["INGEST_SPLIT_BYTES"] == "1" else " not split")
        split = Split.objects.filter(source_id__in=ids).first()
        if split is not None:
            # The scan's share: from the split's start to its last range (each is queued when known).
            last = Chunk.objects.filter(split=split).aggregate(last=Max("dispatched_at"))["last"]
            scan = (last - split.created_at).total_seconds()
            workers = Chunk.objects.filter(split=split).values("worker").distinct().count()
            print(
                f"  scan: {scan:.1f} s ({done / scan:,.0f} events/s on one core), "
                f"{Chunk.objects.filter(split=split).count()} ranges read by {workers} worker process(es)"
            )
        print(
            f"{n} worker(s){how}: {done:,} events in {seconds:.1f} s = {done / seconds:,.0f} events/s "
            f"({failed} failed runs)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    p_lag = sub.add_parser("lag")
    p_lag.add_argument("--seconds", type=int, default=600)
    p_lag.add_argument("--rate", type=int, default=1000)
    p_tp = sub.add_parser("throughput")
    p_tp.add_argument("--records", type=int, default=200_000, help="records per rotated set")
    p_tp.add_argument("--files", type=int, default=4, help="files per rotated set")
    p_tp.add_argument("--sources", type=int, default=2, help="rotated sets (servers)")
    p_tp.add_argument("--chunk-mb", type=int, help="share each backlog out in ranges of this size")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if args.mode == "lag":
        lag(args.seconds, args.rate)
    else:
        throughput(args.records, args.files, args.sources, args.chunk_mb)


if __name__ == "__main__":
    main()
