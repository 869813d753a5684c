"""Benchmark: pgAudit csvlog, the parser alone and `manage.py ingest` end to end, at 50 and 100 MB.

    .venv/bin/python bench/pgaudit_bench.py [--mb 100] [--runs 3] [--workload pgbench|scene|both]
    .venv/bin/python bench/pgaudit_bench.py --stages [--mb 5] [--workload ...]

Two workloads, both real traffic of a private PostgreSQL 15 with pgAudit 1.7:

- `pgbench`, the usual case: a cluster set as an operator would (`pgaudit.log = 'write, ddl'`,
  log_connections, log_disconnections, csvlog) under pgbench (scale 2: 8 clients as postgres,
  2 reconnecting for every transaction as alice, 4 on the simple-update script as bob, in
  turn) until its csvlog holds --mb MB. Made once and cached as bench/out/pgaudit-pgbench.csv
  (delete it to make it again); the smaller file is its head, cut at a record's end.
- `scene`, the adversarial case: the csvlog of tests/fixtures/pgaudit_scene, dense in what
  costs (three logging-off gaps and a restart every 72 events), its session ids renumbered per
  copy (so that each copy's sessions are new ones, as on a server) and repeated until the file
  holds --mb MB (and half that).

Files are written to bench/out/ (gitignored), or to $BENCH_OUT. $BENCH_TREE names another
checkout whose code is measured by this same script (main's worktree, for a before/after in one
run; nothing is written there). For each file, each measure is taken --runs
times, each in a fresh child process, and the minimum is kept:

- parser alone (ingest.parsers.pgaudit_csv, no Django, no database): CPU seconds and wall;
- the full ingest (`manage.py ingest --format pgaudit-csv` into a scratch PostgreSQL database,
  migrated once): CPU seconds of the parsing process (the forked child: parse, sessions,
  classification, gaps, COPY formatting), of the writer (the command's own process: COPY,
  custody, Django start-up included), and of the PostgreSQL backend that served it (from
  /proc/<pid>/stat: the server is on this machine); wall; peak resident memory of each process.

`--stages`: the parsing side alone (what the forked child does, no database) on a file of --mb
MB of each workload, four times, each one stage further: parse (the parser as the ingest opens
it: its resumable form, its lines read through ingest.tail.FileLines); + sessions; +
classification, transactions and gaps; + COPY formatting (with the content window ingest.tail
gives the formatter: an event whose raw bytes are the file's is written with their length, its
bytes go in the batch's chunks). CPU microseconds an event, the minimum of --runs, each run with
every cache of verdicts emptied first.

The machine is shared: wall time is what the others leave, CPU seconds are the figures to
trust. Events/s "by CPU" is events over the busiest process's CPU seconds (the two processes
and PostgreSQL run side by side on separate cores). Writes bench/out/pgaudit.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The code measured: this checkout, or the tree $BENCH_TREE names (e.g. main's worktree, to
# measure "before" with the same script in the same run; nothing is written there).
REPO = Path(os.environ.get("BENCH_TREE") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(REPO))
# Where files are written: bench/out/, or $BENCH_OUT (e.g. where bench/out is not writable).
OUT = Path(os.environ.get("BENCH_OUT") or REPO / "bench" / "out")
SAMPLE = REPO / "tests" / "fixtures" / "pgaudit_scene"
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
_SESSION_RE = re.compile(rb",([0-9a-f]{8})\.([0-9a-f]{1,8}),")
_TICKS = os.sysconf("SC_CLK_TCK")


def make(path: Path, megabytes: int) -> int:
    """Write the sample's csvlog again and again (session ids moved on per copy); its size."""
    truth = json.loads((SAMPLE / "truth.json").read_text())
    data = b"".join((SAMPLE / name).read_bytes() for name in truth["files"]["csv"])
    size = 0
    with path.open("wb") as f:
        copy = 0
        while size < megabytes << 20:
            copy += 1
            shifted = _SESSION_RE.sub(
                lambda m, n=copy: b",%s.%x," % (m[1], (int(m[2], 16) + n * 4096) % (1 << 22)), data
            )
            f.write(shifted)
            size += len(shifted)
    return size


# The usual case: a private PostgreSQL 15 with pgAudit as an operator would set it, under pgbench.
PGBENCH_CONFIG: dict[str, str | None] = {
    "pgaudit.log": "'write, ddl'",
    "pgaudit.log_parameter": None,  # (the defaults: off)
    "pgaudit.log_rows": None,
    "pgaudit.log_relation": None,
    "log_destination": "'csvlog'",
}
# Who runs what: (user, pgbench arguments). alice reconnects for every transaction (a login and
# a logout each), bob runs pgbench's simple-update script.
_PGBENCH_ROUNDS = (
    ("postgres", ("-c", "8", "-j", "2", "-T", "20")),
    ("alice", ("-c", "2", "-C", "-T", "5")),
    ("bob", ("-c", "4", "-b", "simple-update", "-T", "10")),
)


def make_pgbench(path: Path, megabytes: int) -> int:
    """The csvlog of a private PostgreSQL 15 cluster with pgAudit (`pgaudit.log = 'write, ddl'`,
    log_connections and log_disconnections) under pgbench (scale 2; the rounds above, again
    and again) until it holds `megabytes` MB; cached at `path` (made once, then reused)."""
    if path.exists() and path.stat().st_size >= megabytes << 20:
        return path.stat().st_size
    import tempfile

    from tests.fixtures.pgaudit_scene.regenerate import BINDIR, cluster, missing

    why = missing()
    if why:
        raise SystemExit(f"cannot make the pgbench workload: {why}")
    with tempfile.TemporaryDirectory(prefix="auditweb-pgbench-") as keep:
        with cluster(Path(keep), PGBENCH_CONFIG) as c:
            with c.connect(database="shop") as conn:
                conn.execute("CREATE ROLE alice LOGIN")
                conn.execute("CREATE ROLE bob LOGIN")
            base = [str(BINDIR / "pgbench"), "-h", "127.0.0.1", "-p", str(c.port), "-n"]
            subprocess.run(
                [*base[:-1], "-U", "postgres", "-i", "-s", "2", "shop"], check=True, capture_output=True
            )
            with c.connect(database="shop") as conn:
                conn.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO alice, bob")

            def size() -> int:
                return sum(p.stat().st_size for p in (c.data / "log").glob("*.csv"))

            while size() < megabytes << 20:
                for user, arguments in _PGBENCH_ROUNDS:
                    subprocess.run([*base, "-U", user, *arguments, "shop"], check=True, capture_output=True)
        logs = sorted(Path(keep).glob("*.csv"))
        path.write_bytes(b"".join(p.read_bytes() for p in logs))
    return path.stat().st_size


def head_of(source: Path, path: Path, megabytes: int) -> int:
    """The first whole csvlog records of `source` up to `megabytes` MB, written to `path`."""
    from ingest.parsers.records import csv_records

    size = 0
    with source.open("rb") as f, path.open("wb") as out:
        for _, _, raw, _ in csv_records(f, 0, 1, 1 << 30):
            if size + len(raw) > megabytes << 20:
                break
            out.write(raw)
            size += len(raw)
    return size


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def parse_child(path: str) -> dict[str, object]:
    """The parser alone, in this (fresh) process."""
    from ingest.parsers import pgaudit_csv
    from ingest.parsers.records import LogRecord

    started, cpu = time.perf_counter(), time.process_time()
    events = problems = 0
    with open(path, "rb") as f:
        for item in pgaudit_csv.parse(f):
            if isinstance(item, LogRecord):
                events += 1
            else:
                problems += type(item).__name__ == "Problem"
    return {
        "events": events,
        "problems": problems,
        "cpu_s": time.process_time() - cpu,
        "wall_s": time.perf_counter() - started,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def ingest_child(path: str) -> dict[str, object]:
    """`manage.py ingest` in this (fresh) process, with the CPU of each side and PostgreSQL's."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]

    def backend_cpu() -> float:
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime

    pg_before, self_before = backend_cpu(), _cpu(resource.getrusage(resource.RUSAGE_SELF))
    started = time.perf_counter()
    call_command("ingest", path, "--server", "bench", "--format", "pgaudit-csv", verbosity=0)
    wall = time.perf_counter() - started
    pg_cpu = backend_cpu() - pg_before
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM ingest_event")
        events = cursor.fetchone()[0]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the forked parsing process
    own = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "events": events,
        "wall_s": wall,
        "parser_cpu_s": _cpu(children),
        "writer_cpu_s": _cpu(own) - self_before,
        "postgres_cpu_s": pg_cpu,
        "parser_peak_mib": children.ru_maxrss // 1024,
        "writer_peak_mib": own.ru_maxrss // 1024,
    }


def stages(path: Path, runs: int) -> None:
    """CPU us an event of the parsing side, one stage further each time (see the docstring)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    os.environ.setdefault("SECRET_KEY", "bench")
    import django

    django.setup()
    from zoneinfo import ZoneInfo

    from ingest.chunks import ContentWindow
    from ingest.events import EventRecord
    from ingest.normalize import GapFinder, SessionTracker, classifier_for
    from ingest.parsers import by_name, open_parser
    from ingest.parsers.records import Hints
    from ingest.postgres import clear_cache as clear_postgres_cache
    from ingest.rows import RowFormatter
    from ingest.sql import clear_cache as clear_sql_cache
    from ingest.tail import FileLines, open_log

    print("| stage (cumulative) | CPU us an event |")
    print("| --- | --- |")
    for stage, name in enumerate(("parse", "+ sessions", "+ classification, gaps", "+ COPY formatting")):
        best, count = float("inf"), 0
        for _ in range(runs):
            clear_sql_cache()  # (each run works out its statements' verdicts afresh)
            clear_postgres_cache()
            started = time.process_time()
            tracker = SessionTracker("bench", ZoneInfo("UTC"), dialect="postgres")
            # The parser as the ingest opens it (its resumable form), fed and finished, its lines
            # read as ingest.tail reads them (FileLines); with the formatter, the content kept in
            # a window the formatter checks each event's raw bytes against, as ingest.tail does
            # (an event's bytes that are the file's are written as their length alone).
            formatter = RowFormatter(source_file_id=1, ingest_run_id=1)
            lines = FileLines(open_log(path).lines, 0, 1, None, partial_ok=True)
            if stage == 3:
                formatter.window = lines.window = ContentWindow()
            parser = open_parser(by_name("pgaudit-csv"), hints=Hints())
            items: Any = itertools.chain(parser.feed(lines), parser.finish())
            if stage >= 1:
                items = tracker.process(items)
            if stage >= 2:
                finder = GapFinder()
                finder.dialect = "postgres"
                items = finder.process(classifier_for("postgres")(items, tracker.routines))
            count, batch = 0, []
            for item in items:
                count += 1
                if stage == 3 and isinstance(item, EventRecord):
                    batch.append(item)
                    if len(batch) >= 20_000:
                        formatter.format(batch)
                        batch = []
            if batch:
                formatter.format(batch, upto=1 << 62)
            best = min(best, time.process_time() - started)
        print(f"| {name} | {best / count * 1e6:.0f} |")


def _psql(url: str, sql: str) -> None:
    subprocess.run(["psql", url, "-qc", sql], check=True, capture_output=True)


def _child(kind: str, path: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    run = subprocess.run(
        [sys.executable, __file__, f"--{kind}-child", str(path)],
        capture_output=True, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    if run.returncode != 0:
        raise RuntimeError(f"the {kind} run failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _ingest_once(path: Path) -> dict[str, object]:
    """One `manage.py ingest` of `path` into a fresh, migrated scratch database."""
    db = f"auditweb_pgbench_{os.getpid()}"
    _psql(f"{PG}/postgres", f'CREATE DATABASE "{db}"')
    env = dict(os.environ, DATABASE_URL=f"{PG}/{db}", SECRET_KEY="bench", DEBUG="0")
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
        return _child("ingest", path, env)
    finally:
        _psql(f"{PG}/postgres", f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def best(runs: list[dict[str, object]]) -> dict[str, object]:
    """The minimum of each figure over the runs (each measure its own minimum)."""
    return {k: (min(r[k] for r in runs) if isinstance(runs[0][k], float) else runs[0][k]) for k in runs[0]}  # type: ignore[type-var]  # the figures are floats


def machine() -> dict[str, object]:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")
    pg = subprocess.run(
        ["psql", f"{PG}/postgres", "-tAc", "SHOW server_version"], capture_output=True, text=True
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "postgresql": pg.stdout.strip(),
        "load_average": os.getloadavg(),
    }


def workload_file(workload: str, megabytes: int) -> Path:
    """The csvlog of `workload` at `megabytes` MB: the scene repeated (written each time), or the
    head of the cached pgbench log (made once, at the largest size asked for so far)."""
    path = OUT / f"pgaudit-{workload}-{megabytes}mb.csv"
    if workload == "scene":
        make(path, megabytes)
        return path
    cached = OUT / "pgaudit-pgbench.csv"
    make_pgbench(cached, megabytes)
    head_of(cached, path, megabytes)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--workload", choices=("pgbench", "scene", "both"), default="both",
        help="pgbench: real traffic (the usual case); scene: the crime scene repeated (adversarial)",
    )  # fmt: skip
    parser.add_argument("--no-ingest", action="store_true", help="the parser alone")
    parser.add_argument("--stages", action="store_true", help="the parsing side's stages, CPU us an event")
    parser.add_argument("--parse-child")
    parser.add_argument("--ingest-child")
    args = parser.parse_args()
    if args.parse_child:
        print(json.dumps(parse_child(args.parse_child)))
        return 0
    if args.ingest_child:
        print(json.dumps(ingest_child(args.ingest_child)))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    workloads = ("pgbench", "scene") if args.workload == "both" else (args.workload,)
    if args.stages:
        for workload in workloads:
            path = workload_file(workload, args.mb)
            print(f"{workload}, {path.stat().st_size / (1 << 20):.1f} MB:")
            stages(path, args.runs)
            path.unlink()
        print(json.dumps(machine()))
        return 0
    results = []
    for workload in workloads:
        for mb in (args.mb // 2, args.mb):
            path = workload_file(workload, mb)
            size = path.stat().st_size
            result: dict[str, object] = {"workload": workload, "mb": round(size / (1 << 20), 1)}
            result["parser"] = best([_child("parse", path) for _ in range(args.runs)])
            if not args.no_ingest:
                result["ingest"] = best([_ingest_once(path) for _ in range(args.runs)])
            results.append(result)
            path.unlink()
            print(json.dumps(result), flush=True)
    print(json.dumps(machine()))
    print("| workload | file MB | events | parser alone: CPU s (events/s) | peak MiB |")
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        p = r["parser"]
        assert isinstance(p, dict)
        rate = p["events"] / p["cpu_s"]
        print(
            f"| {r['workload']} | {r['mb']} | {p['events']:,} | {p['cpu_s']:.1f} ({rate:,.0f}) |"
            f" {p['peak_mib']} |"
        )
    if not args.no_ingest:
        print()
        print(
            "| workload | file MB | events | parsing process CPU s (us/event) | writer CPU s |"
            " PostgreSQL CPU s | wall s | events/s by CPU | events/s by wall | peak MiB parsing / writer |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in results:
            i = r["ingest"]
            assert isinstance(i, dict)
            busiest = max(i["parser_cpu_s"], i["writer_cpu_s"], i["postgres_cpu_s"])
            print(
                f"| {r['workload']} | {r['mb']} | {i['events']:,} | {i['parser_cpu_s']:.1f}"
                f" ({i['parser_cpu_s'] / i['events'] * 1e6:.0f}) | {i['writer_cpu_s']:.1f} |"
                f" {i['postgres_cpu_s']:.1f} | {i['wall_s']:.1f} | {i['events'] / busiest:,.0f} |"
                f" {i['events'] / i['wall_s']:,.0f} | {i['parser_peak_mib']} / {i['writer_peak_mib']} |"
            )
    (OUT / "pgaudit.json").write_text(json.dumps({"machine": machine(), "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
