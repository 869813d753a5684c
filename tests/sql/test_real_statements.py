"""The classifier on statements taken from real logs: tests/sql/real_statements.tsv says, for each,
its statement type, tables, whether it destroys and its flags, and which case of issue 4 it shows.

Statements of the shared corpus are read from ../shared/corpus/ at test time (never copied into
the repository); those tests skip when it is absent. Statements of our own MariaDB's logs are
looked up in tests/fixtures/. Each is found by parsing its file and following its sessions, so
it is classified with the current database the session tracker knows, as in an ingest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from ingest.events import EventRecord
from ingest.normalize import STATEMENT_COMMANDS, SessionTracker
from ingest.parsers import by_name
from ingest.parsers.detect import detect_format
from ingest.sql import classify

from ..conftest import CORPUS_MISSING, FIXTURES, SHARED

TABLE = Path(__file__).with_name("real_statements.tsv")
CORPUS = SHARED / "corpus"
# The cases issue 4 names; each is shown by a statement of our own logs (so with or without the corpus).
REQUIRED_CASES = {
    "multi-table DELETE with aliases", "multi-table UPDATE", "DELETE t FROM a t JOIN b",
    "backticks, db.table and a subquery", "look-alike: DELETE in a comment", "executable comment",
    "multi-statement string", "lower-case keywords", "harmless (fast path)",
    "unparsed: cut by server_audit_query_log_limit",
    "DELETE", "UPDATE", "REPLACE", "TRUNCATE", "DROP TABLE", "DROP DATABASE", "DROP SCHEMA", "DROP VIEW",
    "ALTER TABLE DROP COLUMN", "ALTER TABLE MODIFY", "ALTER TABLE CHANGE COLUMN",
    "ALTER TABLE DROP PARTITION", "ALTER TABLE TRUNCATE PARTITION", "RENAME TABLE",
    "INSERT ... ON DUPLICATE KEY UPDATE", "LOAD DATA ... REPLACE",
    "no_where", "no_where: WHERE 1=1", "routine: CREATE PROCEDURE", "routine: CALL", "prepared: PREPARE",
    "prepared: EXECUTE", "prepared: a Prepare record", "prepared: an Execute record",
    "privilege_change: GRANT", "privilege_change: REVOKE", "privilege_change: CREATE USER",
    "privilege_change: ALTER USER", "privilege_change: DROP USER", "privilege_change: SET PASSWORD",
    "anti_forensic: general_log OFF", "anti_forensic: log_output NONE", "anti_forensic: sql_log_bin 0",
    "anti_forensic: TRUNCATE mysql.general_log", "anti_forensic: DELETE mysql.slow_log",
    "anti_forensic: audit plugin off", "anti_forensic: audit plugin unloaded",
    "anti_forensic: PURGE BINARY LOGS", "anti_forensic: RESET MASTER",
    "look-alike: a table named deleted_items", "look-alike: DELETE in a string",
    "look-alike: a DELETE that fails (the statement is one)",
}  # fmt: skip


@dataclass(frozen=True)
class Row:
    number: int  # line in the table
    file: str
    statement: str  # corpus: a record's line number; fixtures: the statement
    statement_type: str
    tables: tuple[str, ...]
    destroys: bool
    flags: frozenset[str]
    case: str

    @property
    def in_corpus(self) -> bool:
        return self.file.startswith("corpus/")

    @property
    def path(self) -> Path:
        top, _, rest = self.file.partition("/")
        return (CORPUS if top == "corpus" else FIXTURES) / rest


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES[m[1]], text)


def _rows() -> list[Row]:
    rows = []
    for number, line in enumerate(TABLE.read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        file, statement, kind, tables, destroys, flags, case = line.split("\t")
        assert destroys in ("yes", "no"), f"line {number}: destroys is yes or no"
        rows.append(
            Row(
                number,
                file,
                _unescape(statement),
                kind,
                tuple(t for t in tables.split(",") if t),
                destroys == "yes",
                frozenset(f for f in flags.split(",") if f),
                case,
            )
        )
    return rows


ROWS = _rows()


@cache
def statements_of(path: Path) -> list[EventRecord]:
    """The statements of a log file as an ingest sees them: parsed, and attributed by session."""
    with path.open("rb") as f:
        data = f.read()
    parse = by_name(detect_format(data[:1024])).parse
    events = SessionTracker("real").process(parse(data.splitlines(keepends=True)))
    return [e for e in events if isinstance(e, EventRecord) and e.command in STATEMENT_COMMANDS]


def located(row: Row) -> EventRecord:
    found = statements_of(row.path)
    if row.in_corpus:
        matches = [e for e in found if e.line == int(row.statement)]
    else:
        matches = [e for e in found if e.sql == row.statement][:1]
    assert len(matches) == 1, f"line {row.number}: no single statement {row.statement[:80]!r} in {row.file}"
    return matches[0]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.number}-{r.statement_type or 'none'}")
def test_the_classifier_says_what_the_table_says(row: Row) -> None:
    if row.in_corpus and not CORPUS.is_dir():
        pytest.skip(CORPUS_MISSING)
    event = located(row)
    c = classify(event.sql, event.database)
    assert (c.statement_type, c.tables, c.destructive, c.flags) == (
        row.statement_type,
        row.tables,
        row.destroys,
        row.flags,
    ), f"line {row.number} of {TABLE.name}: {event.sql[:200]!r} (database {event.database!r})"


def test_the_table_holds_150_statements_from_our_own_logs_and_more_from_the_corpus() -> None:
    ours = {(r.file, r.statement) for r in ROWS if not r.in_corpus}
    corpus = {(r.file, r.statement) for r in ROWS if r.in_corpus}
    assert len(ours) >= 150
    assert len(corpus) >= 40
    assert len(ours) + len(corpus) == len(ROWS)  # no statement twice


def test_the_table_shows_every_case_issue_4_names() -> None:
    shown = {r.case for r in ROWS if not r.in_corpus}
    assert REQUIRED_CASES - shown == set()
    assert {"DROP TABLE", "no_where", "privilege_change: GRANT"} <= {r.case for r in ROWS}
