"""A synthetic MariaDB general query log in mariadb-slap's shape, made without a server.

    .venv/bin/python bench/synth_genlog.py OUT.log [--distinct]

200,000 Query records on 50 connections (each opened by a Connect first), a timestamp every 400
records. Without --distinct they repeat 32 texts (16 INSERTs, 16 SELECTs, as mariadb-slap's
auto-generated load does); with --distinct each has its own literals (INSERT, SELECT by key,
UPDATE, DELETE, as bench/distinct_log.py sends), so nearly every event is a new statement of a
few shapes. Deterministic (seeded). For the formatting stage's before/after when
bench/out/slap-*.log cannot be made (mariadb-slap needs the shared server for most of an hour
on a loaded machine).
"""

# ruff: noqa: S608  (the statements are made here from random numbers, not from input)
from __future__ import annotations

import random
import sys
from pathlib import Path

EVENTS = 200_000
CONNECTIONS = 50


def statement(rng: random.Random, texts: list[str], distinct: bool) -> str:
    if not distinct:
        return texts[rng.randrange(len(texts))]
    kind = rng.random()
    if kind < 0.4:
        key, name, amount = rng.randint(0, 10**9), rng.randbytes(6).hex(), rng.random() * 1000
        return f"INSERT INTO t1 (id, name, amount) VALUES ({key}, '{name}', {amount:.2f})"
    if kind < 0.8:
        return f"SELECT id, name FROM t1 WHERE id = {rng.randint(0, 10**9)}"
    if kind < 0.9:
        amount = rng.randint(0, 999)
        return f"UPDATE t1 SET amount = {amount} WHERE id = {rng.randint(0, 10**9)}"
    return f"DELETE FROM t1 WHERE id = {rng.randint(0, 10**9)}"


def main(path: Path, distinct: bool) -> None:
    rng = random.Random(7)
    texts = [
        f"INSERT INTO t1 VALUES ({rng.randint(0, 10**9)},'{rng.randbytes(16).hex()}')" for _ in range(16)
    ]
    texts += [f"SELECT intcol1,charcol1 FROM t1 WHERE id = '{rng.randbytes(8).hex()}'" for _ in range(16)]
    out = [
        "/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:\n",
        "Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\n",
        "Time\t\t    Id Command\tArgument\n",
    ]
    for c in range(1, CONNECTIONS + 1):
        out.append(f"261125  3:00:00\t    {c:3d} Connect\troot@localhost on mysqlslap using Socket\n")
    second = 0
    for i in range(EVENTS):
        c, sql = rng.randint(1, CONNECTIONS), statement(rng, texts, distinct)
        if i % 400 == 0:
            second += 1
            out.append(f"261125  3:{second // 60 % 60:02d}:{second % 60:02d}\t    {c:3d} Query\t{sql}\n")
        else:
            out.append(f"\t\t    {c:3d} Query\t{sql}\n")
    path.write_text("".join(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--distinct" in sys.argv[2:])
