"""A general query log like mariadb-slap's, but with distinct literals in nearly every statement.

    .venv/bin/python bench/distinct_log.py [--queries 200000] [--concurrency 50]

mariadb-slap repeats a handful of pre-generated statements (84 distinct texts in 200,000), which
flatters anything that works once per distinct text (a statement dictionary, a classification
cache). This drives the local MariaDB (root, no password, 127.0.0.1:3306) with `--concurrency`
connections of its own, each sending its share of a mixed load (INSERT, SELECT by key and by
range, UPDATE, DELETE, with the odd transaction) whose literals are drawn at random, with
general_log on, and copies the server's log to bench/out/slap-distinct.log. The server is shared
with the tests and fixture scripts: their lock is held while the log is on.
"""

# ruff: noqa: S608  (the statements are made here from random words and numbers, not from input)
from __future__ import annotations

import argparse
import fcntl
import os
import random
import shutil
import string
import sys
import threading
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from genlog_bench import LOCK, OUT, mariadb  # noqa: E402

SCHEMA = "bench_distinct"


def _word(rng: random.Random, size: int) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits, k=size))


def _statements(rng: random.Random, count: int, keys: int):
    """`count` statements of a mixed load over the table t, each with literals of its own."""
    for _ in range(count):
        pick = rng.random()
        key = rng.randrange(1, keys)
        if pick < 0.35:
            yield (
                f"INSERT INTO t (k, name, amount, note) VALUES ({key}, '{_word(rng, 12)}', "
                f"{rng.randrange(1, 10**6) / 100}, '{_word(rng, rng.randrange(8, 60))}')"
            )
        elif pick < 0.65:
            yield f"SELECT id, name, amount FROM t WHERE k = {key}"
        elif pick < 0.75:
            upper = key + rng.randrange(1, 500)
            yield f"SELECT count(*), sum(amount) FROM t WHERE k BETWEEN {key} AND {upper}"
        elif pick < 0.90:
            amount = rng.randrange(1, 10**6) / 100
            yield f"UPDATE t SET amount = {amount}, note = '{_word(rng, 20)}' WHERE k = {key}"
        elif pick < 0.97:
            yield f"DELETE FROM t WHERE k = {key} AND amount < {rng.randrange(1, 10**4)}"
        else:
            yield "BEGIN"
            yield f"UPDATE t SET name = '{_word(rng, 10)}' WHERE k = {key}"
            yield f"DELETE FROM t WHERE k = {key + 1}"
            yield "COMMIT"


def _client(seed: int, count: int, errors: list[BaseException]) -> None:
    rng = random.Random(seed)
    try:
        conn = pymysql.connect(host="127.0.0.1", user="root", password="", database=SCHEMA, autocommit=True)
        with conn, conn.cursor() as cur:
            for statement in _statements(rng, count, keys=count * 10):
                cur.execute(statement)
                if cur.description:
                    cur.fetchall()
    except BaseException as exc:  # reported by the main thread
        errors.append(exc)


def make_distinct_log(queries: int, concurrency: int) -> Path:
    target = Path("/tmp/auditweb-bench-distinct.log")
    target.unlink(missing_ok=True)
    lock = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    mariadb(
        f"DROP DATABASE IF EXISTS {SCHEMA}; CREATE DATABASE {SCHEMA}; CREATE TABLE {SCHEMA}.t ("
        "id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, name VARCHAR(40), amount DECIMAL(12,2),"
        " note VARCHAR(80), KEY (k))"
    )
    before = mariadb("SELECT @@general_log_file").split()[-1]
    mariadb(f"SET GLOBAL general_log_file = '{target}'; SET GLOBAL general_log = ON")
    errors: list[BaseException] = []
    try:
        threads = [
            threading.Thread(target=_client, args=(seed, queries // concurrency, errors))
            for seed in range(concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        mariadb(f"SET GLOBAL general_log = OFF; SET GLOBAL general_log_file = '{before}'")
        mariadb(f"DROP DATABASE {SCHEMA}")
        os.close(lock)
    if errors:
        raise errors[0]
    copy = OUT / "slap-distinct.log"
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(target, copy)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=200_000)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    print(make_distinct_log(args.queries, args.concurrency))


if __name__ == "__main__":
    main()
