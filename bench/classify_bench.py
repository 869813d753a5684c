"""Benchmark: the SQL classifier on mariadb-slap statements, one core, no database.

    .venv/bin/python bench/classify_bench.py [--queries 200000] [--repeat 7]

Three workloads of --queries statements each, NUL-terminated as the general
log shows mariadb-slap's:
  1. mariadb-slap mixed, as mariadb-slap sends them (`mariadb-slap --only-print`,
     which prints them without touching a server): its generator repeats a
     handful of rows, so verbatim repeats dominate, as pings, BEGIN/COMMIT and
     SET NAMES do in application logs;
  2. the same two statements with fresh random values in every statement
     (no verbatim repeat: every statement takes the key path);
  3. Django-style statements (backtick-quoted names, numbers), all distinct.
For each: "cold" is the first pass with empty caches (it includes the few
sqlglot parses, one per statement shape); "warm" passes run over freshly
generated statements for workloads 2 and 3, best and median of --repeat, in
CPU time (what one core does) and wall clock (which also counts waiting for
the CPU on a shared machine).
"""

# The SQL here is benchmark input for the classifier; nothing executes it.
# ruff: noqa: S608

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import string
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ingest.sql import classify, clear_cache  # noqa: E402


def slap_statements(queries: int, seed: int = 0) -> list[str]:
    """Statements of a mixed mariadb-slap load, NUL-terminated like in the log."""
    slap = shutil.which("mariadb-slap") or shutil.which("mysqlslap")
    if not slap:
        return unique_slap_statements(queries, seed)
    out = subprocess.run(
        [slap, "--only-print", "--auto-generate-sql", "--auto-generate-sql-load-type=mixed",
         "--auto-generate-sql-add-autoincrement", f"--number-of-queries={queries}",
         "--concurrency=1", "--iterations=1"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    lines = [line.rstrip(";") for line in out.splitlines() if line.startswith(("INSERT", "SELECT"))]
    return [line + "\x00" for line in lines[:queries]]


def unique_slap_statements(queries: int, seed: int) -> list[str]:
    """mariadb-slap's two statements, with fresh values in each."""
    rng = random.Random(seed)
    chars = string.ascii_letters + string.digits
    statements = []
    for i in range(queries):
        if i % 2:
            text = "".join(rng.choices(chars, k=128))
            statements.append(f"INSERT INTO t1 VALUES (NULL,{rng.randrange(2**31)},'{text}')\x00")
        else:
            statements.append(f"SELECT intcol1,charcol1 FROM t1 WHERE id =  '{rng.randrange(10**12):x}'\x00")
    return statements


def django_statements(queries: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"SELECT `shop_order`.`id`, `shop_order`.`total` FROM `shop_order` "
        f"WHERE `shop_order`.`customer_id` = {rng.randrange(10**9)} LIMIT 21"
        if i % 2
        else f"UPDATE `shop_order` SET `total` = {rng.randrange(10**6)} WHERE `shop_order`.`id` = {i}"
        for i in range(queries)
    ]


def rate(statements: list[str], clock: Callable[[], float]) -> float:
    started = clock()
    for sql in statements:
        classify(sql, "mysqlslap")
    return len(statements) / (clock() - started)


def measure(name: str, make: Callable[[int], list[str]], repeat: int) -> None:
    clear_cache()
    first = make(0)
    cold = rate(first, time.process_time)
    wall, cpu = [], []
    for i in range(1, repeat + 1):
        cpu.append(rate(make(i), time.process_time))
        wall.append(rate(make(repeat + i), time.perf_counter))
    shapes = len({classify(s, "mysqlslap").fingerprint for s in first})
    print(
        f"| {name} | {len(first):,} | {shapes} | {cold:,.0f}"
        f" | {max(cpu):,.0f} / {statistics.median(cpu):,.0f}"
        f" | {max(wall):,.0f} / {statistics.median(wall):,.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    n = args.queries
    slap = slap_statements(n)
    print(f"Python {sys.version.split()[0]}, statements/s on one core (best / median of {args.repeat})\n")
    print("| statements | count | fingerprints | cold | warm, CPU time | warm, wall clock |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    measure("mariadb-slap mixed, as sent", lambda seed: slap, args.repeat)
    measure("same, fresh values in each", lambda seed: unique_slap_statements(n, seed), args.repeat)
    measure("Django-style, all distinct", lambda seed: django_statements(n, seed), args.repeat)


if __name__ == "__main__":
    main()
