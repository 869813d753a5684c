"""Fuzzing every parser and the classifier (issue 18): the real samples of tests/fixtures (and
a sample of each audit format), mutated by Hypothesis with a fixed seed and a bounded budget,
go through the pure part of the ingest pipeline (parser, session tracker, classifier) as the
parsing process runs it. Nothing may raise, and every line is accounted for: inside a
record's raw bytes, or at or after a Problem that no record follows before it (blank lines
and the XML envelope aside, which are no data). A binary format (the binlog) has no lines: its
mutated files must give only its own items (file, transactions, problems), never an exception."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.binlog.metadata import BinlogFile, Transaction
from ingest.binlog.reader import BinlogProblem
from ingest.normalize import GapFinder, SessionTracker, classifier_for
from ingest.parsers import (
    NAMES,
    binary_reader,
    by_name,
    dialect_of,
    pgaudit_csv,
    pgaudit_json,
    pgaudit_stderr,
    xml_audit,
)
from ingest.parsers.records import Hints, LogRecord, Problem, ServerStart
from ingest.sql import classify

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE_BYTES = 6000  # of each fixture: mutations work on a few dozen records


def _fixture(*names: str) -> list[bytes]:
    return [(FIXTURES / name).read_bytes()[:SAMPLE_BYTES] for name in names]


SAMPLES: dict[str, list[bytes]] = {
    "binlog": _fixture(
        "binlog_scene/mariadb-10.11.19-mariadb-bin.000001", "binlog_scene/mariadb-10.11.19-mariadb-bin.000003"
    ),
    "general-log": _fixture(
        "genlog/mariadb-10.11.19-scenario.log", "crime_scene/mariadb-10.11.19-general.log"
    ),
    "mariadb-audit": _fixture(
        "server_audit/mariadb-10.11.19-scenario.log",
        "server_audit_syslog/mariadb-10.11.19-syslog-rfc5424.log",
        "server_audit_syslog/mariadb-10.11.19-syslog-rfc3164.log",
    ),
    "general-log-csv": _fixture("general_log_table/mariadb-10.11.19-scenario.CSV"),
    "general-log-tsv": _fixture("general_log_table/mariadb-10.11.19-scenario.tsv"),
    # The pgAudit scene's first files (the real server's), cut to SAMPLE_BYTES: its set-up and
    # the first statements, sessions interleaved with the postmaster's lines.
    **{
        fmt: _fixture(
            *(f"pgaudit_scene/{p.name}" for p in sorted(FIXTURES.glob(f"pgaudit_scene/*-1{suffix}")))
        )
        for fmt, suffix in (("pgaudit-csv", ".csv"), ("pgaudit-json", ".json"), ("pgaudit-stderr", ".log"))
    },
    # Oracle's exports of the scene's rows (tests/fixtures/oracle_scene: no Oracle server here).
    "oracle-csv": _fixture("oracle-csv/unified-scene.csv"),
    "oracle-json": _fixture("oracle-json/unified-scene.json"),
    "oracle-xml": _fixture("oracle-xml/ora_1234_1.xml"),
    "json-audit": [
        b'{"audit_record":{"name":"Query","record":"1_2026","timestamp":"2026-01-05T09:00:00 UTC",'
        b'"command_class":"delete","connection_id":"9","status":0,"sqltext":"DELETE FROM t WHERE a = \'x\'",'
        b'"user":"app[bob] @ web1 [10.0.0.2]","host":"web1","os_user":"","ip":"10.0.0.2","db":"shop"}}\n'
        b'{"msg-type":"activity","date":"1767603600000","thread-id":"12","user":"eve","priv_user":"",'
        b'"host":"h","ip":"10.9.9.9","cmd":"delete","query":"DELETE FROM orders","rows":"3","status":"0"}\n'
        b'{"timestamp":"2026-01-05 09:00:02","id":1,"class":"general","event":"status","connection_id":5,'
        b'"account":{"user":"bob","host":"h"},"login":{"user":"bob","os":"","ip":"10.0.0.3","proxy":""},'
        b'"general_data":{"command":"Query","sql_command":"drop_table","query":"DROP TABLE t","status":0}},\n'
    ],
    "xml-audit": [
        b'<?xml version="1.0" encoding="UTF-8"?>\n<AUDIT>\n'
        b'<AUDIT_RECORD NAME="Connect" RECORD="1_2026" TIMESTAMP="2026-01-05T09:00:00 UTC" CONNECTION_ID="9"'
        b' STATUS="0" USER="bob" PRIV_USER="bob" OS_LOGIN="" PROXY_USER="" HOST="h" IP="10.0.0.8"'
        b' DB="shop"/>\n'
        b'<AUDIT_RECORD NAME="Query" RECORD="2_2026" TIMESTAMP="2026-01-05T09:00:01 UTC"'
        b' COMMAND_CLASS="delete" CONNECTION_ID="9" STATUS="0"'
        b' SQLTEXT="DELETE FROM t WHERE a = &quot;x&quot;" USER="bob[bob] @ h [10.0.0.8]"'
        b' HOST="h" OS_USER="" IP="10.0.0.8" DB="shop"/>\n'
        b"<AUDIT_RECORD>\n <NAME>Query</NAME>\n <RECORD>3_2026</RECORD>\n"
        b" <TIMESTAMP>2026-01-05T09:00:02 UTC</TIMESTAMP>\n <CONNECTION_ID>9</CONNECTION_ID>\n"
        b" <SQLTEXT>DROP TABLE t</SQLTEXT>\n</AUDIT_RECORD>\n</AUDIT>\n"
    ],
    "audit-csv": [
        b'"Connect","1_2026","2026-01-05T09:00:00 UTC",7,0,"bob","bob","","","db1","10.0.0.8","shop"\n'
        b'"Query","2_2026","2026-01-05T09:00:01 UTC","delete",7,0,"DELETE FROM orders WHERE note = ""a,b""",'
        b'"bob[bob] @ db1 [10.0.0.8]","db1","","10.0.0.8","shop"\n'
        b'"Quit","3_2026","2026-01-05T09:00:02 UTC",7,0,"bob","bob","","","db1","10.0.0.8","shop"\n'
    ],
}

HINTS = Hints(mtime_year=2024)  # syslog's BSD time takes the year from the file

# What a hostile log writer puts in: quotes, escapes, comment openers, a NUL, line ends,
# digits past 2^63, the banner's words, structure of the other formats.
TOKENS = [
    b"'", b'"', b"`", b"\\", b"\n", b"\r\n", b"\t", b" " * 300, b"\x00", b"\xff\xfe", b"/*", b"/*!", b"*/",
    b"-- ", b"#", b";", b",", b"(", b")" * 50, b"123456789012345678901234", b"-1", b", Version: ",
    b" started with:", b"Connect\t", b"Query\t", b"{", b"}", b"[", b"<", b">", b"&#0;", b"&amp;",
    b"DELETE FROM t", b"DELETE ", b"\\'", b"''", b"=", b"@",
]  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, fmt: str) -> bytes:
    data = bytearray(draw(st.sampled_from(SAMPLES[fmt])))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["token", "bytes", "delete", "repeat"]))
        if kind == "token":
            data[at:at] = draw(st.sampled_from(TOKENS)) * draw(st.integers(1, 20))
        elif kind == "bytes":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 200))]
        else:
            piece = bytes(data[at : at + draw(st.integers(1, 120))])
            data[at:at] = piece * draw(st.integers(2, 30))
    return bytes(data)


def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _no_data(line: bytes, fmt: str = "") -> bool:
    """Blank, or only the XML envelope (declaration, <AUDIT>, </AUDIT>), as the XML parser reads it,
    or a format's own structure where it says what that is (Oracle's exports: `structure`)."""
    structure = getattr(by_name(fmt), "structure", None) if fmt else None
    if structure is not None and structure(line):
        return True
    return not line.strip() or xml_audit._ENVELOPE.fullmatch(line) is not None


# PostgreSQL's layouts: the server's own messages that are no record (checkpoints, "connection
# received"...) are read and left out, not problems: a line of one is accounted for.
SERVER_MESSAGES = {"pgaudit-csv": pgaudit_csv, "pgaudit-json": pgaudit_json, "pgaudit-stderr": pgaudit_stderr}


def _spans(item: LogRecord | ServerStart) -> list[tuple[int, int]]:
    """The byte ranges of a record: one, or the pieces a pgAudit statement's `parts` lists."""
    parts = item.extra.get("parts") if isinstance(item, LogRecord) else None
    if parts:
        return [(int(a), int(a) + int(n)) for a, n in (p.split(":") for p in parts.split(","))]
    return [(item.offset, item.offset + len(item.raw))]


def check(fmt: str, data: bytes) -> None:
    read = binary_reader(by_name(fmt))
    if read is not None:
        got = list(read(io.BytesIO(data), "fuzz"))
        assert all(isinstance(i, BinlogFile | Transaction | BinlogProblem) for i in got), fmt
        return
    tracker = SessionTracker("fuzz", dialect=dialect_of(fmt))
    items = list(by_name(fmt).parse(lines_of(data), hints=HINTS))
    finder = GapFinder(dialect=tracker.dialect)
    list(finder.process(classifier_for(tracker.dialect)(tracker.process(iter(items)), tracker.routines)))
    spans = sorted(s for i in items if isinstance(i, (LogRecord, ServerStart)) for s in _spans(i))
    if fmt in SERVER_MESSAGES:
        layout = SERVER_MESSAGES[fmt]
        spans += [
            (m.offset, m.offset + len(m.raw))
            for m in layout._lines(lines_of(data), 0, 1, *([HINTS] if fmt == "pgaudit-stderr" else []))
            if not isinstance(m, Problem)
        ]
        spans.sort()
    problems = sorted(i.offset for i in items if isinstance(i, Problem))
    for s, e in spans:
        assert 0 <= s <= e <= len(data)
    offset = 0
    for line in lines_of(data):
        start, end = offset, offset + len(line)
        offset = end
        if _no_data(line, fmt) or any(s < end and start < e for s, e in spans):
            continue
        # Not in a record: a Problem must stand on it, or before it with no record starting between.
        if any(start <= p < end for p in problems):
            continue
        before = [p for p in problems if p <= start]
        assert before, f"{fmt}: line at {start} ({line[:80]!r}) is in no record and after no problem"
        assert not any(before[-1] < s <= start for s, _ in spans), f"{fmt}: line at {start} unaccounted for"


FUZZ = settings(
    max_examples=300, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


@pytest.mark.parametrize("fmt", sorted(NAMES))
def test_every_parser_survives_mutated_samples(fmt: str) -> None:
    @FUZZ
    @given(mutated(fmt))
    def run(data: bytes) -> None:
        check(fmt, data)

    run()


@pytest.mark.parametrize("fmt", sorted(NAMES))
def test_every_sample_is_accounted_for_as_it_is(fmt: str) -> None:
    for sample in SAMPLES[fmt]:
        check(fmt, sample)


SQL_WORDS = [
    "SELECT", "DELETE", "FROM", "WHERE", "UPDATE", "SET", "INSERT", "INTO", "VALUES", "CREATE",
    "DROP", "ALTER", "TABLE", "PROCEDURE", "BEGIN", "END", "WITH", "AS", "RENAME", "TO", "GRANT",
    "ON", "PREPARE", "EXECUTE", "DEFINER=", "t", "`db`.`t`", "a.*", "1", "'x'", '"y"', "(", ")",
    ",", ";", ".", "=", "/*", "*/", "/*!40101", "-- ", "#", "\\", "'", "\n", "  ", "@@general_log",
    "OFF", "FOR", "IF EXISTS", "LIKE", "USING",
]  # fmt: skip


@FUZZ
@given(st.lists(st.sampled_from(SQL_WORDS), max_size=60), st.sampled_from([None, "shop"]))
def test_the_classifier_survives_any_statement(words: list[str], database: str | None) -> None:
    c = classify(" ".join(words), database)
    assert isinstance(c.statement_type, str)
