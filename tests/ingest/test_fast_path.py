"""The ingest fast path's shortcuts (issue 22) decide exactly what the long way decides.

No database: the pre-checks of the parsing process, and the COPY buffer a batch crosses the pipe as.
"""

from __future__ import annotations

import zlib
from datetime import UTC, date, datetime

import pytest

from ingest import rows
from ingest.custody import batch_digest, row_checks
from ingest.events import EventRecord, SessionInfo, session_id_of
from ingest.normalize import _TEXTS, new_statement_text, statement_text, unstorable_problem
from ingest.parsers.records import LogRecord
from ingest.rows import ROW_COLUMNS, RowFormatter, statement_id, statement_key, stored_narrow_line
from ingest.sql.secrets import _LITERAL_START, _TRIGGER_WORDS, _may_hold_secret, mask_secrets
from ingest.textsafe import _UNSTORABLE, unstorable


@pytest.mark.parametrize("word", _TRIGGER_WORDS)
def test_every_trigger_word_in_any_case_still_triggers_the_secret_check(word: str) -> None:
    for spelt in (word, word.upper(), word.title()):
        assert _may_hold_secret(f"SELECT 1 /* {spelt} */")


def test_a_statement_without_trigger_or_literal_skips_masking() -> None:
    sql = "INSERT INTO t1 VALUES (1804289383,'mxvtvmC9127qJNm06sGB8R92q2j7')"
    assert not _may_hold_secret(sql)
    assert mask_secrets(sql) is sql
    assert "*****" in mask_secrets("SET PASSWORD FOR 'a'@'%' = PASSWORD('hunter2')")


@pytest.mark.parametrize(
    ("sql", "found"),
    [
        ("SELECT x'41'", True),
        ("SELECT B'01'", True),
        ("SELECT 0x41", True),
        ("SELECT 0b01", True),
        ("SELECT ax'41'", False),  # inside a word
        ("SELECT 'b'", False),  # after a quote: the end of a string
        ("SELECT a0x41", False),
        ("SELECT 1.0x2", False),  # inside a number
        ("SELECT 0X41", False),  # the server reads 0X41 as no hex literal
        ("SELECT note FROM t WHERE a = 'zx' AND b = 'qb'", False),
    ],
)
def test_a_hex_or_bit_literal_is_found_where_it_begins_and_only_there(sql: str, found: bool) -> None:
    """The literal's pattern starts with a fixed character (and looks behind it from there), so
    the search skips ahead in C: these are the answers of its first form, which looked first."""
    assert (_LITERAL_START.search(sql) is not None) is found
    assert _may_hold_secret(sql) is found


@pytest.mark.parametrize(
    ("sql", "effects"),
    [
        ("INSERT INTO t VALUES (1)", (None, None)),
        ("DELETE FROM t", (None, None)),
        ("Use shop", ("shop", None)),
        (" \tUSE shop", ("shop", None)),
        ("/* app */ USE shop", ("shop", None)),
        ("flush logs", (None, "FLUSH")),
        ("SET GLOBAL general_log = 0", (None, "SET G")),
        ("\u017fET GLOBAL general_log = 0", (None, "SET G")),  # long s upper-cases to S
        ("\nSHUTDOWN", (None, "SHUTD")),
        ("SELECT 1", (None, None)),
        ("", (None, None)),
    ],
)
def test_what_a_new_statement_text_does_is_read_from_its_first_characters(
    sql: str, effects: tuple[str | None, str | None]
) -> None:
    """new_statement_text answers from the first character for statements that can be neither
    a USE nor one that reopens or switches off the log; every other one is read in full."""
    _TEXTS.clear()
    text = new_statement_text(sql.encode())
    assert text == (sql, False, *effects)
    assert statement_text(sql.encode()) is text  # remembered


@pytest.mark.parametrize(
    "value",
    ["", "localhost", "a\x00b", "\x00", "café", "caf\x00é", "x\ud800", "\udfff", "ok \u2028 line", "日本"],
)
def test_unstorable_agrees_with_the_full_expression(value: str) -> None:
    assert unstorable(value) is (_UNSTORABLE.search(value) is not None)


def record(**fields: object) -> LogRecord:
    base: dict[str, object] = {
        "line": 7,
        "offset": 700,
        "raw": b"raw\n",
        "occurred_at": None,
        "connection_id": 3,
        "command": "Query",
        "argument": b"SELECT 1",
    }
    return LogRecord(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "found"),
    [
        ({}, False),
        ({"user": "root", "host": "localhost", "ip": "10.0.0.1", "database": "shop"}, False),
        ({"user": "rené", "host": "hôte"}, False),  # not ASCII, yet storable
        ({"user": "ro\x00ot"}, True),
        ({"host": "h\ud800"}, True),
        ({"database": "db\x00"}, True),
        ({"status": "\x00"}, True),
        ({"extra": {"program_name": "cli\x00"}}, True),
        ({"extra": {"program_name": "mysql"}}, False),
    ],
)
def test_unstorable_problem_finds_a_nul_or_surrogate_in_any_field(fields: dict, found: bool) -> None:
    problem = unstorable_problem(record(**fields))
    assert (problem is not None) is found
    if problem is not None:
        assert (problem.line, problem.offset) == (7, 700)


def event(sql: str, raw: bytes, offset: int) -> EventRecord:
    session = SessionInfo(key="db1/boot/3", server="db1", boot="boot", connection_id=3)
    return EventRecord(
        occurred_at=datetime(2026, 11, 25, 4, 0, offset % 60, tzinfo=UTC),
        server="db1",
        session=session,
        connection_id=3,
        user="root",
        host="localhost",
        ip=None,
        database="shop",
        command="Query",
        sql=sql,
        raw=raw,
        line=offset,
        offset=offset,
        tables=("shop.t",),
        flags={"unattributed"},
    )


def test_a_batch_buffer_holds_one_line_per_event_whatever_the_values_hold() -> None:
    hostile = [
        ("SELECT 'a\nb'", b"x\n"),
        ("SELECT 'tab\there'", b"\t\t\n"),
        ("SELECT 'cr\r\nlf'", b"\r\n"),
        ("SELECT '\\\\'", b"\\\n"),
        ("SELECT 'é \u2028 \x85 \x1c'", "é \u2028 \x85 \x1c\n".encode()),
        ("SELECT 1", bytes(range(256))),
        ("SELECT 2", b"\t\tSELECT 2\x00\n"),
    ]
    events = [event(sql, raw, i + 1) for i, (sql, raw) in enumerate(hostile)]
    events[0].user, events[1].host, events[2].status = "us\ter", "ho\\st", "st\natus"
    events[3].definer, events[4].rows_affected, events[5].flags = "def\rner", 7, {"b", 'a\t"'}
    batch = RowFormatter(source_file_id=4, ingest_run_id=5).format(events)
    assert batch.count == len(batch.lines) == len(batch.rows) == len(events)
    assert b"".join(batch.lines) == batch.narrow
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in batch.lines)
    # One field per column on every line: no value's tab or newline leaked into the format.
    assert {line.count(b"\t") for line in batch.lines} == {len(ROW_COLUMNS) - 1}
    # The line is what verification makes again from the columns stored (the values as COPY
    # reads them back), and what the chain digests of it is of each line as written.
    statements = {row[0]: row for row in batch.statements}
    for e, line in zip(events, batch.rows, strict=True):
        fields = line[:-1].split("\t")
        statement = statements[int(fields[-1])]
        stored = {
            "occurred_at": e.occurred_at, "server": e.server, "connection_id": e.connection_id,
            "user": e.user, "host": e.host, "ip": e.ip, "command": e.command,
            "statement_type": statement[3], "tables": statement[4], "destructive": statement[5],
            "rows_affected": e.rows_affected, "status": e.status, "raw": e.raw, "line": e.line,
            "byte_offset": e.offset, "record_hash": e.record_hash(), "ingest_run_id": 5,
            "session_id": session_id_of(e.session.key), "source_file_id": 4,
            "attribution": e.attribution, "definer": e.definer, "raw_length": len(e.raw),
            "statement_id": statement[0],
        }  # fmt: skip
        assert stored_narrow_line(stored, sorted(e.flags)) == line
    assert row_checks(batch.lines) == b"".join(zlib.crc32(line).to_bytes(4, "big") for line in batch.lines)
    named = [(row[0], row[1]) for row in batch.statements]
    assert batch_digest(batch.narrow, named) == batch_digest(b"".join(batch.lines), reversed(named))
    assert batch_digest(batch.narrow, named) != batch_digest(batch.narrow, named[1:])


def test_the_record_hash_in_a_row_is_the_events_own() -> None:
    """The formatter makes the record hash itself (cheaper): the values must stay those of
    EventRecord.record_hash, the events' identity in reports, cases and alerts."""
    events = [event("SELECT 1", b"x\n", i) for i in range(1, 4)]
    events[1].occurred_at, events[2].server = None, "dé"  # no time; a server not ASCII
    batch = RowFormatter(source_file_id=4, ingest_run_id=5).format(events)
    field = ROW_COLUMNS.index("record_hash")
    assert [line.split("\t")[field] for line in batch.rows] == [
        "\\\\x" + e.record_hash().hex() for e in events
    ]


def test_an_empty_batch_is_an_empty_buffer() -> None:
    batch = RowFormatter(source_file_id=4, ingest_run_id=None).format([])
    assert (batch.narrow, batch.count, batch.lines) == (b"", 0, [])


def test_each_batch_names_the_months_of_its_events_even_when_the_tracker_shares_a_time() -> None:
    formatter = RowFormatter(source_file_id=4, ingest_run_id=5)
    late = datetime(2026, 1, 31, 23, 59, 59, tzinfo=UTC)
    events = [event("SELECT 1", b"x\n", i) for i in range(1, 5)]
    events[0].occurred_at = datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    events[1].occurred_at = events[2].occurred_at = events[3].occurred_at = late  # one object
    assert formatter.format(events[:2]).months == {date(2025, 12, 1), date(2026, 1, 1)}
    # The next batch begins with the very object the last one ended with: still its month.
    assert formatter.format(events[2:]).months == {date(2026, 1, 1)}
    events[3].occurred_at = None
    assert formatter.format(events[3:]).months == set()


def test_every_statement_is_keyed_as_statement_key_whatever_shapes_the_formatter_saw() -> None:
    """The formatter hashes a statement's values but its text once per shape (rows._shape) and
    each text from a copy of that hash: every key must stay statement_key's of the values as
    stored (bounded), every id statement_id's, whichever texts and shapes came before."""

    def bounded(value: str, limit: int) -> str:
        return value if len(value) <= limit else value[: limit - 1] + "…"

    formatter = RowFormatter(source_file_id=4, ingest_run_id=5)
    long_table, long_database = "s." + "t" * 500, "d" * 300
    events = [event(f"SELECT {i}", b"x\n", i + 1) for i in range(12)]
    # Texts of one shape; then the same text under another database, type, tables, destructive
    # or fingerprint (a shape of its own), going back and forth; bounded values; a NUL in the
    # fingerprint; no database; a text beyond ASCII (the key encodes it as UTF-8). (No lone
    # surrogate: statement_text decodes a record's bytes with replacement, and the statement's
    # COPY line, as PostgreSQL's text, could not hold one.)
    events[2].sql = events[3].sql = events[4].sql = events[5].sql = "DELETE FROM t"
    events[3].database, events[4].statement_type, events[5].destructive = "billing", "DELETE", True
    events[6].sql, events[6].tables, events[6].database = "SELECT 6", (long_table,), long_database
    events[7].fingerprint, events[7].statement_type = "select \x00?", "S" * 70
    events[8].database, events[9].sql = None, "SELECT '\ufffd\U0001f600é'"
    events[10].sql, events[11].sql = "DELETE FROM t", "DELETE FROM t"
    events[11].database = "billing"
    first = formatter.format(events[:6])
    second = formatter.format(events[6:])
    for batch, batch_events in ((first, events[:6]), (second, events[6:])):
        statements = {row[0]: row for row in batch.statements}
        for e, line in zip(batch_events, batch.rows, strict=True):
            number, key, database, statement_type, tables, destructive, fingerprint, sql = statements[
                int(line[:-1].split("\t")[-1])
            ]
            assert key == statement_key(database, statement_type, tables, destructive, fingerprint, sql)
            assert number == statement_id(key)
            assert (destructive, sql) == (e.destructive, e.sql)
            assert database == (e.database and bounded(e.database, 200))
            assert statement_type == bounded(e.statement_type, 60)
            assert tables == [bounded(t, 400) for t in e.tables]
            assert fingerprint == e.fingerprint.replace("\x00", "")
    # The same text under four shapes: four statements; the same values again: the same id.
    deletes = {int(line[:-1].split("\t")[-1]) for line in first.rows[2:6]}
    assert len(deletes) == 4
    assert int(second.rows[4][:-1].split("\t")[-1]) == int(first.rows[2][:-1].split("\t")[-1])
    assert int(second.rows[5][:-1].split("\t")[-1]) == int(first.rows[3][:-1].split("\t")[-1])


def test_two_keys_with_one_id_take_the_ids_they_took_before_and_again_after_a_start_afresh(
    monkeypatch,
) -> None:
    """Ids are their keys' (statement_id); where a key's first id is another key's that the
    formatter named, it takes the next. The formatter forgets its statements and the ids they
    named only when it starts afresh (more than _FORMATTED_CACHE_SIZE statements made): which
    id each text gets must stay what it was, whatever the formatter keeps its statements in."""
    real_id = rows.statement_id
    monkeypatch.setattr(
        rows, "statement_id", lambda key, attempt=0: 7 if attempt == 0 else real_id(key, attempt)
    )
    monkeypatch.setattr(rows, "_FORMATTED_CACHE_SIZE", 2)
    formatter = RowFormatter(source_file_id=4, ingest_run_id=5)

    def ids(*texts: str) -> list[int]:
        batch = formatter.format([event(text, b"x\n", i + 1) for i, text in enumerate(texts)])
        return [int(line[:-1].split("\t")[-1]) for line in batch.rows]

    key = {text: statement_key("shop", "", ["shop.t"], False, "", text) for text in ("A", "B", "C")}
    assert ids("A", "B", "A") == [7, real_id(key["B"], 1), 7]
    # Two statements made: not more than 2, so kept; C's first id is A's.
    assert ids("C", "A", "B") == [real_id(key["C"], 1), 7, real_id(key["B"], 1)]
    # Three made: the formatter starts afresh, and the first text to come takes the first id.
    assert ids("B", "C", "A") == [7, real_id(key["C"], 1), real_id(key["A"], 1)]
