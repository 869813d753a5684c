"""Benchmark: peak memory of parsing a .gz upload that holds one huge line (issue 18, item 5).

    .venv/bin/python bench/huge_line_bench.py [--sizes 67108864,268435456,1073741824] [--cap 16777216]
        [--unbounded 268435456]

For each size it writes (streamed, never whole in memory or uncompressed on disk) a general
log compressed with gzip: a Connect, a DELETE whose statement is `size` bytes of one letter,
and a DROP TABLE after it. A fresh process then reads it the way an upload or a followed
.gz file is read (ingest.checkpoints.open_content's GzipFile, ingest.tail.FileLines capped at
--cap, the general-log parser, session tracker, classifier and gap finder: tail_messages,
without a database), and reports its peak RSS (resource.getrusage ru_maxrss), its RSS once
its modules were loaded (the baseline), CPU seconds, and what came out: the events (the
DROP after the huge line must be among them) and the problem that says the line was cut.

--unbounded SIZE reads one file the way these sources read before (each line whole), for
comparison; 0 skips it. Results: docs/benchmarks.md, "A huge line in a .gz".
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PIECE = 1 << 20

HEAD = b"2024-05-01T10:00:00.000000Z\t    7 Connect\talice@10.0.0.7 on shop using TCP/IP\n"
DELETE = b"2024-05-01T10:00:01.000000Z\t    7 Query\tDELETE FROM shop.orders WHERE note = '"
AFTER = b"'\n2024-05-01T10:00:02.000000Z\t    7 Query\tDROP TABLE shop.customers\n"


def write_gz(path: Path, size: int) -> None:
    """The log, compressed as it is written: `size` bytes of one letter cost about size/1000."""
    piece = b"x" * PIECE
    with gzip.open(path, "wb", compresslevel=6) as gz:
        gz.write(HEAD + DELETE)
        left = size
        while left > 0:
            gz.write(piece[: min(PIECE, left)])
            left -= PIECE
        gz.write(AFTER)


def read(path: str, cap: int, unbounded: bool) -> dict[str, object]:
    """In the measured process: read the file as an upload is read; what came out, and the cost."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    import django

    django.setup()
    from ingest.normalize import GapFinder, SessionTracker
    from ingest.parsers.records import Hints, Problem
    from ingest.tail import FileLines, tail_messages

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    f = open(path, "rb")  # noqa: SIM115
    g = gzip.GzipFile(fileobj=f, mode="rb")
    if unbounded:  # as FileLines read before: each line whole
        lengths = [len(line) for line in g]
        out = {"lines": len(lengths), "longest": max(lengths)}
    else:
        lines = FileLines(g, 0, 1, None, partial_ok=True, cap=cap)
        events, problems = 0, []
        tracker = SessionTracker("bench")
        for batch in tail_messages(
            fmt="general-log",
            lines=lines,
            finish=True,
            hints=Hints(mtime_year=2024),
            tracker=tracker,
            gaps=GapFinder(),
            formatter=None,
            batch_size=1 << 30,
        ):
            events += batch.seen
            problems += [p.reason for p in batch.problems if isinstance(p, Problem)]
        out = {"events": events, "problems": problems, "read_to": lines.offset}
    g.close()
    cpu = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out | {"baseline_kib": baseline, "peak_kib": peak, "cpu_s": round(cpu, 2)}


def measure(path: Path, cap: int, unbounded: bool) -> dict[str, Any]:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from bench.huge_line_bench import read; "
        "print(json.dumps(read(sys.argv[2], int(sys.argv[3]), sys.argv[4] == '1')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(REPO), str(path), str(cap), "1" if unbounded else "0"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    mem = next(
        line.split()[1]
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    gib = int(mem) / 1024 / 1024
    return f"{os.cpu_count()} CPUs ({cpu}), {gib:.1f} GiB RAM, Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--sizes", default=f"{1 << 26},{1 << 28},{1 << 30}", help="bytes of the huge line, comma-separated"
    )
    ap.add_argument("--cap", type=int, default=16 * 1024 * 1024, help="INGEST_MAX_LINE_BYTES")
    ap.add_argument("--unbounded", type=int, default=1 << 28, help="size read as before (0: none)")
    args = ap.parse_args()
    print(machine())
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(int(s), False) for s in args.sizes.split(",")]
        if args.unbounded:
            runs.append((args.unbounded, True))
        for size, unbounded in runs:
            path = Path(tmp) / f"huge-{size}.log.gz"
            if not path.exists():
                write_gz(path, size)
            r = measure(path, args.cap, unbounded)
            how = "each line whole (before)" if unbounded else f"capped at {args.cap:,}"
            print(
                f"line of {size:>13,} bytes, .gz of {path.stat().st_size:>9,} bytes, {how}: {json.dumps(r)}"
            )
            if not unbounded and (r.get("events") != 3 or len(r.get("problems", [])) != 1):
                failed = True  # the Connect, the DELETE (cut) and the DROP after it; one problem
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
