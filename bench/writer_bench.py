"""Benchmark: the writer alone (ingest.store.EventWriter) and its PostgreSQL backend, per batch.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/SCRATCH .venv/bin/python bench/writer_bench.py \
        --log bench/out/slap-distinct.log [--runs 3] [--profile] [--cache /tmp/stw22]

Run it from the checkout to measure (`cd /other/checkout && python /this/bench/writer_bench.py`):
its code formats the log's events into batches of 20,000 as the parsing process does (parse,
sessions, classification and gaps, RowFormatter, pickled as for the pipe; once, cached under
`--cache` by checkout and log), then each run stores them into a fresh copy of a migrated
database (the name of DATABASE_URL plus `_wb`, made from a template `..._wbtpl` that `manage.py
migrate` builds once per run of this script), one transaction per batch as ingest.commit does:
unpickle, `EventWriter.write_formatted`, commit. It prints, for each run, the CPU seconds of
this process over those steps (the writer's share of an ingest: no parsing), of the PostgreSQL
backend that served it (/proc/<pid>/stat: the server must be on this machine) and the wall
seconds; the minimum of `--runs`. `--profile`: one more run under cProfile, its top functions.
The database is local and shared: the load of the machine moves every figure but the minimum.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import os
import pickle
import pstats
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

sys.path.insert(0, os.getcwd())  # the checkout measured is the one this is run from
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")
BASE_URL = os.environ["DATABASE_URL"]
_parts = urlsplit(BASE_URL)
SCRATCH = _parts.path.lstrip("/") + "_wb"
TEMPLATE = _parts.path.lstrip("/") + "_wbtpl"
os.environ["DATABASE_URL"] = urlunsplit(_parts._replace(path="/" + SCRATCH))

import django  # noqa: E402
import psycopg  # noqa: E402

BATCH = 20_000  # INGEST_BATCH_SIZE's default


def admin(sql: str) -> None:
    with psycopg.connect(urlunsplit(_parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(sql)


def fresh_database(template: bool = False) -> None:
    """A new scratch database: the template migrated (once), or a copy of it."""
    if template:
        admin(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
        admin(f'CREATE DATABASE "{TEMPLATE}"')
        env = dict(os.environ, DATABASE_URL=urlunsplit(_parts._replace(path="/" + TEMPLATE)))
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"], check=True, env=env, cwd=os.getcwd()
        )
    admin(f'DROP DATABASE IF EXISTS "{SCRATCH}"')
    admin(f'CREATE DATABASE "{SCRATCH}" TEMPLATE "{TEMPLATE}"')


def batches(log: Path, cache: Path, fmt: str) -> list[bytes]:
    """The log's batches, pickled as for the pipe, made by this checkout's parsing side."""
    code = Path("ingest/rows.py").read_bytes()  # (batches made by other code are not these)
    tag = f"{os.getcwd()}|{log.resolve()}|{log.stat().st_mtime_ns}|{fmt}|{hashlib.sha256(code).hexdigest()}"
    tag = hashlib.sha256(tag.encode()).hexdigest()[:16]
    path = cache / f"writer-bench-{tag}.pickles"
    if path.exists():
        return pickle.loads(path.read_bytes())  # our own file, made below
    from ingest.chunks import ContentWindow
    from ingest.events import EventRecord
    from ingest.normalize import GapFinder, SessionTracker, classifier_for, mysql_stages
    from ingest.parsers import by_name, dialect_of
    from ingest.parsers.records import Hints
    from ingest.rows import RowFormatter
    from ingest.tail import FileLines, open_log

    opened = open_log(log)
    formatter = RowFormatter(source_file_id=1, ingest_run_id=None)
    window = formatter.window = ContentWindow()
    lines = FileLines(opened.lines, 0, 1, None, partial_ok=True)
    lines.window = window
    parsed = by_name(fmt).parse(lines, hints=Hints(mtime_year=2026))
    tracker, gaps = SessionTracker("bench", ZoneInfo("UTC")), GapFinder()
    tracker.dialect = gaps.dialect = dialect_of(fmt)
    items: Iterator[object]
    if fmt == "general-log":
        items = mysql_stages(parsed, tracker, gaps)
    else:
        items = gaps.process(classifier_for(tracker.dialect)(tracker.process(parsed), tracker.routines))
    batch: list[EventRecord] = []
    pickles: list[bytes] = []
    for item in items:
        if isinstance(item, EventRecord):
            batch.append(item)
            if len(batch) >= BATCH:
                pickles.append(pickle.dumps(formatter.format(batch), pickle.HIGHEST_PROTOCOL))
                batch = []
    pickles.append(pickle.dumps(formatter.format(batch, upto=1 << 62), pickle.HIGHEST_PROTOCOL))
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(pickles, pickle.HIGHEST_PROTOCOL))
    return pickles


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PHASES: dict[str, list[float]] = {}  # `--phases`: the writer's and the backend's CPU seconds per step


def timed_phases(backend: int) -> None:
    """Wrap the writer's steps to add up their CPU seconds and the backend's (`--phases`)."""
    from ingest import store

    def wrap(owner: object, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: object, **kwargs: object) -> object:
            cpu, pg = time.process_time(), backend_cpu(backend)
            try:
                return inner(*args, **kwargs)
            finally:
                spent = PHASES.setdefault(label, [0.0, 0.0])
                spent[0] += time.process_time() - cpu
                spent[1] += backend_cpu(backend) - pg

        setattr(owner, name, timed)

    wrap(store, "store_chunks", "content chunks")
    wrap(store, "ensure_event_partitions", "partitions")
    wrap(store.EventWriter, "_upsert_sessions", "sessions")
    wrap(store.EventWriter, "_add_statements", "statements")
    wrap(store.EventWriter, "_copy", "COPY of the rows")
    wrap(store.EventWriter, "_chain", "custody link")


def one_run(
    pickles: list[bytes], profile: cProfile.Profile | None = None, phases: bool = False
) -> dict[str, float]:
    from django.db import connection, transaction

    from ingest.models import Source, SourceFile
    from ingest.partitions import forget_known_partitions
    from ingest.store import EventWriter

    connection.close()
    fresh_database()
    forget_known_partitions()  # (a fresh database: none of the month partitions exists)
    source = Source.objects.create(name="writer-bench", server="bench")
    source_file = SourceFile.objects.create(source=source, path="/bench.log", size=0, head_sha256="0" * 64)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        backend = cur.fetchone()[0]
    if phases:
        timed_phases(backend)
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=None)
    events = 0
    pg_before, cpu_before, wall_before = backend_cpu(backend), time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    for message in pickles:
        batch = pickle.loads(message)  # our own pickles
        if batch.count == 0 and not batch.chunks:
            continue
        with transaction.atomic():
            events += writer.write_formatted(batch)
    if profile is not None:
        profile.disable()
    cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
    pg = backend_cpu(backend) - pg_before
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM ingest_statement")
        statements = cur.fetchone()[0]
    return {"events": events, "statements": statements, "writer": cpu, "postgres": pg, "wall": wall}


# What a run stored, to compare checkouts (`--digest`): every column of the statements, the event
# rows and the sessions; each link's fields but its time and hashes (which hold the time); alerts.
DIGESTS = {
    "statements": "SELECT md5(string_agg(t::text, E'\\n' ORDER BY id)) FROM ingest_statement t",
    "event rows": "SELECT md5(string_agg(t::text, E'\\n' ORDER BY id)) FROM ingest_event_row t",
    "sessions": "SELECT md5(string_agg(t::text, E'\\n' ORDER BY id)) FROM ingest_session t",
    "links": "SELECT md5(string_agg(concat_ws('|', seq, kind, id_after, id_last, offset_min, offset_max,"
    " event_count, encode(row_digests, 'hex'), encode(rows_sha256, 'hex'), version, chunks::text),"
    " E'\\n' ORDER BY seq)) FROM ingest_custodylink",
    "alerts": "SELECT md5(string_agg(concat_ws('|', kind, server, event_time, encode(event_hash, 'hex'),"
    " event_id), E'\\n' ORDER BY event_id, kind)) FROM ingest_alert",
}


def digests() -> dict[str, str]:
    from django.db import connection

    with connection.cursor() as cur:
        out = {}
        for name, sql in DIGESTS.items():
            cur.execute(sql)
            out[name] = cur.fetchone()[0]
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--format", default="general-log", help="the log's format (ingest.parsers)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--digest", action="store_true", help="print digests of what the first run stored")
    ap.add_argument("--phases", action="store_true", help="one more run: CPU seconds per step of the writer")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/writer-bench"))
    args = ap.parse_args()
    fresh_database(template=True)
    django.setup()
    pickles = batches(args.log, args.cache, args.format)
    best: dict[str, float] = {}
    for run in range(args.runs):
        result = one_run(pickles)
        print(f"run {run + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()), flush=True)
        best = {k: min(best.get(k, float("inf")), v) for k, v in result.items()}
        if args.digest and run == 0:
            for name, value in digests().items():
                print(f"digest of {name}: {value}")
    load = os.getloadavg()
    print(
        f"{os.getcwd()}: {best['events']:.0f} events, {best['statements']:.0f} statements;"
        f" min of {args.runs}: writer CPU {best['writer']:.2f} s, PostgreSQL backend CPU"
        f" {best['postgres']:.2f} s, wall {best['wall']:.2f} s (load {load[0]:.1f} {load[1]:.1f})"
    )
    if args.phases:
        total = one_run(pickles, phases=True)
        for label, (cpu, pg) in PHASES.items():
            print(f"  {label}: writer {cpu:.2f} s, PostgreSQL {pg:.2f} s")
        print(
            f"  all (with the rest: unpickling, alerts, commits): writer {total['writer']:.2f} s,"
            f" PostgreSQL {total['postgres']:.2f} s"
        )
    if args.profile:
        profile = cProfile.Profile()
        one_run(pickles, profile)
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    from django.db import connection

    connection.close()
    admin(f'DROP DATABASE IF EXISTS "{SCRATCH}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
