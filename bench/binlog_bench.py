"""Benchmark: the binlog metadata pass against `mariadb-binlog` on the same ~100 MB of binlog.

    .venv/bin/python bench/binlog_bench.py [--mb 100] [--runs 3]

Needs root and Debian's MariaDB binaries. Makes the binlog first when bench/out/binlog/ has
none: a private MariaDB (tests/fixtures/attribution_scene's PrivateServer, its own datadir and
port; the shared server is not touched) with log_bin, ROW, FULL image and FULL metadata,
driven with one INSERT of 100,000 rows (bench/binlog_rows_bench.py pages through it), then a
mix: bulk INSERT ... SELECT from the sequence engine, bulk UPDATEs and DELETEs (big rows
events), and a stored procedure running single-row UPDATEs in autocommit (one small
transaction each: the per-event cost) until the files reach `--mb`.

Then, `--runs` times each, alternately, each in a fresh process: `mariadb-binlog` over every
file into /dev/null (its rate is the bar), and our metadata pass (`ingest.binlog.metadata.scan`)
over the same files. Reports per tool the minimum CPU seconds (user + system of the child,
from wait4, which other load disturbs less than wall time), the minimum wall seconds, MB/s of
both, and the peak resident memory (ours: VmHWM read by the probe itself; mariadb-binlog's
from wait4, an upper bound: Linux counts the forking parent's pages in it). Ours is given twice:
the whole process (interpreter start and imports, about 0.14 CPU s, included) and the pass
alone (time.process_time around it), which is what an ingest pays: its process has started
and imported before the first file. Writes bench/out/binlog.json.
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
OUT = REPO / "bench" / "out"
BINLOGS = OUT / "binlog"
sys.path.insert(0, str(REPO))

PROBE = """
import sys, time
from ingest.binlog.metadata import scan, Transaction
rows = txs = 0
started = time.process_time()  # the pass itself: after the interpreter's start and the imports
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        for item in scan(f, path):
            if isinstance(item, Transaction):
                txs += 1
                rows += item.rows
spent = time.process_time() - started
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print(txs, rows, hwm[0] if hwm else "0", spent)
"""


def make_binlogs(mb: int) -> None:
    # Imported here: only generating the binlog needs the scene's private server.
    from tests.fixtures.attribution_scene.regenerate import PrivateServer

    class BinlogServer(PrivateServer):
        def write_options(self, *, general_log: bool, logging: bool) -> None:
            super().write_options(general_log=False, logging=False)
            text = self.cnf.read_text().replace("skip-log-bin\n", "")
            text += (
                f"log_bin = {self.binlogs / 'mariadb-bin'}\nbinlog_format = ROW\nbinlog_row_image = FULL\n"
                "binlog_row_metadata = FULL\nmax_binlog_size = 256M\nsync_binlog = 0\n"
                "innodb_flush_log_at_trx_commit = 0\n"
            )
            self.cnf.write_text(text)

    base = Path(tempfile.mkdtemp(prefix="auditweb-binlog-bench-"))
    server = BinlogServer(base)
    server.install()
    server.write_options(general_log=False, logging=True)
    server.start()
    try:
        conn = server.root()
        with conn.cursor() as c:
            c.execute("CREATE DATABASE bench")
            c.execute("USE bench")
            c.execute(
                "CREATE TABLE bench.t (id INT PRIMARY KEY, name VARCHAR(64),"
                " note VARCHAR(255) CHARACTER SET latin1, amount DECIMAL(12,2), at DATETIME(6), qty INT,"
                " flag TINYINT, body TEXT)"
            )
            c.execute(
                "CREATE PROCEDURE bench.small(n INT) BEGIN DECLARE i INT DEFAULT 0; WHILE i < n DO"
                " UPDATE bench.t SET qty = qty + 1 WHERE id = 1 + (i * 7919) MOD 50000; SET i = i + 1;"
                " END WHILE; END"
            )
            # One statement of 100,000 rows (the rows page's bench: bench/binlog_rows_bench.py).
            c.execute("CREATE TABLE bench.big LIKE bench.t")
            c.execute(
                "INSERT INTO bench.big SELECT seq, CONCAT('big-', seq), REPEAT('é', seq MOD 40), seq / 7,"
                " NOW(6), seq MOD 100, seq MOD 2, IF(seq MOD 5 = 0, REPEAT('x', 200), NULL)"
                " FROM seq_1_to_100000"
            )
            start = 0
            while _size(server.binlogs) < mb * 1024 * 1024:
                c.execute(
                    "INSERT INTO bench.t SELECT seq + %s, CONCAT('name-', seq), REPEAT('é', seq MOD 40),"
                    " seq / 7, NOW(6), seq MOD 100, seq MOD 2, IF(seq MOD 5 = 0, REPEAT('x', 200), NULL)"
                    " FROM seq_1_to_50000",
                    (start,),
                )
                c.execute("UPDATE bench.t SET amount = amount + 1 WHERE id > %s", (start,))
                c.execute("CALL bench.small(20000)")
                if start:
                    c.execute("DELETE FROM bench.t WHERE id <= %s", (start - 25000,))
                start += 50000
        conn.close()
    finally:
        server.stop()
        if sys.exc_info()[0] is not None:
            subprocess.run(["rm", "-rf", str(base)], check=False)
    BINLOGS.mkdir(parents=True, exist_ok=True)
    for p in sorted(server.binlogs.glob("mariadb-bin.0*")):
        p.rename(BINLOGS / p.name)
    subprocess.run(["rm", "-rf", str(base)], check=True)


def _size(folder: Path = BINLOGS) -> int:
    return 0 if not folder.exists() else sum(p.stat().st_size for p in folder.glob("mariadb-bin.0*"))


def measure(cmd: list[str], stdout: int | None = None) -> tuple[float, float, float, bytes]:
    """(cpu seconds, wall seconds, peak RSS in MB, stdout) of a child process."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout if stdout is not None else subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if status:
        raise RuntimeError(f"{cmd[0]} failed with status {status}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if _size() < args.mb * 1024 * 1024 * 0.9:
        make_binlogs(args.mb)
    files = sorted(str(p) for p in BINLOGS.glob("mariadb-bin.0*"))
    total = sum(Path(p).stat().st_size for p in files)
    results: dict[str, dict[str, float]] = {}
    ours = [sys.executable, "-c", PROBE, *files]
    theirs = ["mariadb-binlog", *files]
    counts = b""
    pass_cpu = float("inf")
    with open(os.devnull, "wb") as null:
        for _ in range(args.runs):
            for name, cmd in (("mariadb-binlog", theirs), ("auditweb metadata pass", ours)):
                cpu, wall, rss, out = measure(cmd, null.fileno() if name == "mariadb-binlog" else None)
                if out:
                    counts = out
                    pass_cpu = min(pass_cpu, float(out.split()[3]))
                r = results.setdefault(name, {"cpu_s": cpu, "wall_s": wall, "peak_rss_mb": rss})
                r["cpu_s"], r["wall_s"] = min(r["cpu_s"], cpu), min(r["wall_s"], wall)
                r["peak_rss_mb"] = max(r["peak_rss_mb"], rss)
    mb = total / 1e6
    for r in results.values():
        r["mb_per_cpu_s"] = round(mb / r["cpu_s"], 1)
        r["mb_per_wall_s"] = round(mb / r["wall_s"], 1)
    if len(counts.split()) == 4:  # the probe's own peak (wait4's includes the forking parent's pages)
        results["auditweb metadata pass"]["peak_rss_mb"] = round(int(counts.split()[2]) / 1024, 1)
    # Memory flat in the file's size: the probe's peak over the first 50 MB of the file alone.
    half = OUT / "binlog-50mb" / Path(files[0]).name
    half.parent.mkdir(parents=True, exist_ok=True)
    with open(files[0], "rb") as src, open(half, "wb") as dst:
        dst.write(src.read(50 * 1000 * 1000))  # cut inside an event: the scan says so, and stops
    out_half = measure([sys.executable, "-c", PROBE, str(half)])[3].split()
    peaks = {"50 MB": round(int(out_half[2]) / 1024, 1)}
    peaks[f"{mb:.0f} MB"] = round(int(counts.split()[2]) / 1024, 1)
    ours_r, theirs_r = results["auditweb metadata pass"], results["mariadb-binlog"]
    # The pass alone, as at ingest (where the interpreter and its imports are already there).
    ours_r["pass_only_cpu_s"] = round(pass_cpu, 3)
    ours_r["pass_only_mb_per_cpu_s"] = round(mb / pass_cpu, 1)
    report = {"binlog_mb": round(mb, 1), "files": len(files), "runs": args.runs,
              "transactions_rows": counts.decode().split()[:2],
              "rate_vs_mariadb_binlog": {"process": round(theirs_r["cpu_s"] / ours_r["cpu_s"], 2),
                                         "pass_only": round(theirs_r["cpu_s"] / pass_cpu, 2)},
              "peak_rss_mb_of_the_pass": peaks, "results": results}  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "binlog.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
