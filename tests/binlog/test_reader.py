"""The binlog reader on hostile bytes: every cut and every flipped byte ends in a problem
with its position, never an exception or a hang; and the pieces without a server."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ingest.binlog.flashback import literal
from ingest.binlog.join import Link, LoggedStatement, RowStatement, Unlinked, join
from ingest.binlog.metadata import BinlogFile, Transaction, scan
from ingest.binlog.reader import BinlogProblem, recognise
from ingest.binlog.rows import decode_text, encode_latin1
from ingest.binlog.schema import parse_create_table

SCENE = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_scene"
FILES = sorted(SCENE.glob("mariadb-*-mariadb-bin.*"))
needs_files = pytest.mark.skipif(
    not FILES, reason="tests/fixtures/binlog_scene has no binlogs: run regenerate.py"
)


def test_it_recognises_binlogs_by_their_magic() -> None:
    assert recognise(b"\xfebin\x00\x00")
    assert not recognise(b"/usr/sbin/mariadbd, Version: 10.11")


@needs_files
def test_it_reports_a_truncated_file_with_the_position_of_the_cut() -> None:
    data = FILES[0].read_bytes()
    whole = [x for x in scan(io.BytesIO(data), "f") if isinstance(x, Transaction)]
    for cut in range(5, len(data), 97):
        items = list(scan(io.BytesIO(data[:cut]), "f"))
        problems = [x for x in items if isinstance(x, BinlogProblem)]
        if not problems:  # only a cut between transactions is a file that simply ends there
            assert cut <= whole[0].start or cut in {t.end for t in whole}, f"cut at {cut}"
            continue
        assert 0 <= problems[-1].position < cut
        done = [x for x in items if isinstance(x, Transaction) and x.ended_by == "xid"]
        assert done == whole[: len(done)]


@needs_files
def test_a_flipped_byte_is_a_checksum_problem_never_a_crash() -> None:
    data = bytearray(FILES[0].read_bytes())
    for at in range(4, len(data), 53):
        copy = bytearray(data)
        copy[at] ^= 0x5A
        items = list(scan(io.BytesIO(bytes(copy)), "f"))
        assert any(isinstance(x, BinlogProblem) for x in items), f"flip at {at}"


@needs_files
def test_the_first_file_of_a_boot_says_when_the_server_started() -> None:
    created = [
        next(x for x in scan(f.open("rb"), f.name) if isinstance(x, BinlogFile)).created for f in FILES
    ]
    assert created[0] and not created[1] and created[2]  # FLUSH BINARY LOGS, then a restart


def test_latin1_is_exact_for_every_byte() -> None:
    raw = bytes(range(256))
    assert encode_latin1(decode_text(raw, "latin1")) == raw  # type: ignore[arg-type]  # latin1 is text


def test_literals_cannot_escape_their_quotes() -> None:
    assert literal("it's") == "'it''s'"
    assert literal("a\\'); DROP TABLE x; --") == "_utf8mb4 X'" + b"a\\'); DROP TABLE x; --".hex() + "'"
    assert literal(b"\x00\xff") == "X'00ff'"
    assert literal(None) == "NULL"


def test_it_reads_names_keys_and_generated_columns_from_create_table() -> None:
    schema = parse_create_table(
        "CREATE TABLE `t` (`a` int NOT NULL, `b` varchar(9) CHARACTER SET latin1, `c` blob,"
        " `g` int GENERATED ALWAYS AS (`a` + 1) VIRTUAL, PRIMARY KEY (`a`)) DEFAULT CHARSET=utf8mb4"
    )
    assert [c.name for c in schema.columns] == ["a", "b", "c", "g"]
    assert [c.charset for c in schema.columns] == [None, "latin1", "binary", None]
    assert [c.generated for c in schema.columns] == [False, False, False, True]
    assert schema.primary_key == ("a",)


def _row(
    key: str, tx: str, order: int, text: str, *, thread: int | None = None, server: int = 1
) -> RowStatement:
    return RowStatement(key, tx, order, 0, 100, text, thread, server, 1)


def test_a_thread_id_in_the_binlog_decides_between_identical_statements() -> None:
    logged = [LoggedStatement(n, 100, n, "DELETE FROM t", 1, 1) for n in (5, 6)]
    rows = [_row("x", "tx1", 0, "DELETE FROM t", thread=6), _row("y", "tx2", 1, "DELETE FROM t", thread=5)]
    links = join(logged, rows)
    assert [(link.statement, link.confidence) for link in links] == [(6, "thread_id"), (5, "thread_id")]


def test_rows_of_another_server_are_replication() -> None:
    logged = [LoggedStatement(1, 100, 1, "DELETE FROM t", 1, 1)]
    rows = [
        _row("x", "a", 0, "DELETE FROM t"),
        _row("y", "b", 1, "DELETE FROM t"),
        _row("z", "c", 2, "X", server=9),
    ]
    results = join(logged, rows, server_id=1)
    assert results[2].reason.startswith("replication")  # type: ignore[union-attr]  # an Unlinked
    assert {r.confidence for r in results[:2]} == {"ambiguous"}  # type: ignore[union-attr]  # Links


def test_candidates_are_the_statements_within_a_second_whatever_order_the_logs_come_in() -> None:
    # One text sent every second for a minute, given newest first (event ids need not follow
    # time): a row statement at second 130 has those of 129-131 as candidates, no other.
    logged = [LoggedStatement(1000 - t, t, 7, "DELETE FROM t LIMIT 1", t, 1) for t in range(159, 99, -1)]
    rows = [RowStatement("x", "tx", 0, 0, 130, "DELETE FROM t LIMIT 1", None, 1, 1)]
    (link,) = join(logged, rows)
    assert isinstance(link, Link) and link.confidence == "ambiguous"
    assert link.candidates == (869, 870, 871)  # seconds 131, 130, 129: in the order given
    # Without text, by the connection the binlog names: its statement of that moment only.
    logged += [LoggedStatement(5, 200, 8, "UPDATE u SET a = 1", 1, 1), LoggedStatement(6, 203, 8, "x", 2, 1)]
    (link,) = join(logged, [RowStatement("y", "ty", 0, 0, 201, None, 8, 1, 1)])
    assert isinstance(link, Link) and (link.statement, link.confidence) == (5, "thread_id")
    (gone,) = join(logged, [RowStatement("z", "tz", 0, 0, 201, None, 8, 1, 2)])  # another boot
    assert isinstance(gone, Unlinked)
