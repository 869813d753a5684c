"""Benchmark: the table as it was at T (investigations.query.binlog_state.table_at) on the
binlogs of bench/binlog_bench.py, against `mariadb-binlog -v` decoding the same files.

    DATABASE_URL=... SECRET_KEY=... .venv/bin/python bench/table_at_bench.py [--mb 100] [--runs 3]

Makes the binlogs as bench/binlog_bench.py does when bench/out/binlog/ has none (a private
MariaDB; the shared server is not touched), ingests them into the store named by DATABASE_URL
twice over: a quarter-size set (bench/out/binlog-small/) as server `bench-small`, the full set as
`bench-big`. Then, `--runs`
times each, alternately, each in a fresh process: one page (100 rows) of `bench.t` at the middle
of its changes, for each server, and `mariadb-binlog -v --base64-output=DECODE-ROWS` over the
same files into /dev/null (every row decoded to text: the peer's rate). Reports the minimum CPU
seconds (user + system, from wait4: the whole process, with the interpreter's start and Django's
imports) and wall seconds, the call's own CPU seconds (`process_time` around `table_at`, what a
running web worker pays), row changes decoded per CPU second of each (the peer's: the table's row
changes over its CPU seconds, all of them being decoded by both), and
the page's peak resident memory (VmHWM read by the probe): flat when the two servers' peaks
are the same while their rows differ. Writes bench/out/table_at.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.binlog_bench import BINLOGS, OUT, _size, make_binlogs, measure  # noqa: E402

SMALL = OUT / "binlog-small"

PROBE = """
import os, sys, time, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
django.setup()
from django.db.models import Max, Min
from ingest.models import BinlogTransaction
from investigations.query.binlog_state import table_at
server = sys.argv[1]
span = BinlogTransaction.objects.filter(server=server).aggregate(a=Min("commit_time"), b=Max("commit_time"))
started = time.process_time()  # the call alone: a web worker has started and imported already
page = table_at(server, "bench.t", span["a"] + (span["b"] - span["a"]) / 2, size=100)
spent = time.process_time() - started
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print(page.decoded, len(page.rows), hwm[0] if hwm else "0", spent, int(page.stopped))
"""


def ingest(server: str, files: list[str]) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "ingest", *files, "--server", server],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    # bench/binlog_bench.py writes about 25 MB a loop: the quarter-size set needs --mb of 100 or more.
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if _size(SMALL) == 0:  # a quarter of the size, kept apart: memory is compared across the two
        if _size() == 0:
            make_binlogs(max(2, args.mb // 4))
        SMALL.mkdir(parents=True, exist_ok=True)
        for p in BINLOGS.glob("mariadb-bin.0*"):
            p.rename(SMALL / p.name)
    if _size() < args.mb * 1024 * 1024 * 0.9:
        make_binlogs(args.mb)
    small = sorted(str(p) for p in SMALL.glob("mariadb-bin.0*"))
    files = sorted(str(p) for p in BINLOGS.glob("mariadb-bin.0*"))
    subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "-v", "0"], check=True)
    ingest("bench-small", small)
    ingest("bench-big", files)
    results: dict[str, dict[str, float]] = {}
    commands = {
        "mariadb-binlog -v (big)": ["mariadb-binlog", "-v", "--base64-output=DECODE-ROWS", *files],
        "table at T (small)": [sys.executable, "-c", PROBE, "bench-small"],
        "table at T (big)": [sys.executable, "-c", PROBE, "bench-big"],
    }
    with open(os.devnull, "wb") as null:
        for _ in range(args.runs):
            for name, cmd in commands.items():
                peer = name.startswith("mariadb-binlog")
                cpu, wall, rss, out = measure(cmd, null.fileno() if peer else None)
                r = results.setdefault(name, {"cpu_s": cpu, "wall_s": wall, "peak_rss_mb": rss})
                r["cpu_s"], r["wall_s"] = min(r["cpu_s"], cpu), min(r["wall_s"], wall)
                if not peer:
                    decoded, shown, hwm, spent, stopped = out.split()
                    r.update(
                        row_changes=int(decoded),
                        rows_shown=int(shown),
                        peak_rss_mb=round(int(hwm) / 1024, 1),
                        stopped_at_max_decoded=bool(int(stopped)),
                        call_cpu_s=round(min(r.get("call_cpu_s", float("inf")), float(spent)), 3),
                    )
                    r["row_changes_per_cpu_s"] = round(int(decoded) / r["cpu_s"])
                    r["row_changes_per_call_cpu_s"] = round(int(decoded) / r["call_cpu_s"])
    peer, big = results["mariadb-binlog -v (big)"], results["table at T (big)"]
    if not big["stopped_at_max_decoded"]:  # then the page read every row change of the table
        peer["row_changes_per_cpu_s"] = round(big["row_changes"] / peer["cpu_s"])
    mb = {
        "first file": Path(files[0]).stat().st_size / 1e6,
        "all files": sum(Path(p).stat().st_size for p in files) / 1e6,
    }
    report = {"binlog_mb": {k: round(v, 1) for k, v in mb.items()}, "runs": args.runs, "results": results}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "table_at.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
