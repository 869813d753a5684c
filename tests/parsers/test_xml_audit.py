"""XML audit logs (MySQL Enterprise Audit, Percona audit_log and audit_log_filter): bytes in, records out."""

from __future__ import annotations

import random
import re
import tracemalloc
from datetime import UTC, datetime

import pytest

from ingest.parsers import xml_audit
from ingest.parsers.records import LogRecord, Problem
from ingest.parsers.xml_audit import MAX_RECORD_BYTES, recognise

from ..conftest import CORPUS_MISSING, SHARED

CORPUS = SHARED / "corpus"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=CORPUS_MISSING)


def parse(data: bytes) -> list[LogRecord | Problem]:
    items = list(xml_audit.parse(data.splitlines(keepends=True)))
    for item in items:  # every record and problem points at its own bytes
        assert data[item.offset : item.offset + len(item.raw)] == item.raw or isinstance(item, Problem)
    return items


def summary(items: list) -> list[tuple]:
    return [
        ("PROBLEM", i.line, i.reason.split(":")[0])
        if isinstance(i, Problem)
        else (
            i.line,
            i.command,
            i.user,
            i.host,
            i.ip,
            i.connection_id,
            i.occurred_at,
            i.status,
            i.argument,
            i.database,
        )
        for i in items
    ]


T = datetime
U = UTC

EXPECTED = {
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_NEW-xml_sample.xml": [
        (3, "Audit", None, None, None, None, T(2019, 10, 3, 14, 6, 33, tzinfo=U), None, b"", None),
        (
            15,
            "Connect",
            "root",
            "localhost",
            "127.0.0.1",
            5,
            T(2019, 10, 3, 14, 9, 38, tzinfo=U),
            "ok",
            b"",
            "test",
        ),
        ("PROBLEM", 44, "not an audit record"),  # the documentation's "..." between records
        (
            46,
            "Query",
            "root",
            "localhost",
            "127.0.0.1",
            5,
            T(2019, 10, 3, 14, 9, 38, tzinfo=U),
            "ok",
            b"DROP TABLE IF EXISTS t",
            None,
        ),
        ("PROBLEM", 61, "not an audit record"),
        (
            63,
            "Quit",
            "root",
            "localhost",
            "127.0.0.1",
            5,
            T(2019, 10, 3, 14, 9, 39, tzinfo=U),
            "ok",
            b"",
            None,
        ),
        ("PROBLEM", 78, "not an audit record"),
        (
            80,
            "Quit",
            "root",
            "localhost",
            "127.0.0.1",
            6,
            T(2019, 10, 3, 14, 9, 43, tzinfo=U),
            "ok",
            b"",
            None,
        ),
        (94, "NoAudit", None, None, None, None, T(2019, 10, 3, 14, 9, 45, tzinfo=U), None, b"", None),
    ],
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_OLD-xml_sample.xml": [
        (3, "Audit", None, None, None, None, T(2019, 10, 3, 14, 25, 0, tzinfo=U), None, b"", None),
        (
            12,
            "Connect",
            "root",
            "localhost",
            "127.0.0.1",
            4,
            T(2019, 10, 3, 14, 25, 24, tzinfo=U),
            "ok",
            b"",
            "test",
        ),
        ("PROBLEM", 29, "not an audit record"),
        (
            31,
            "Query",
            "root",
            "localhost",
            "127.0.0.1",
            4,
            T(2019, 10, 3, 14, 25, 24, tzinfo=U),
            "ok",
            b"DROP TABLE IF EXISTS t",
            None,
        ),
        ("PROBLEM", 45, "not an audit record"),
        (
            47,
            "Quit",
            "root",
            "localhost",
            "127.0.0.1",
            4,
            T(2019, 10, 3, 14, 25, 24, tzinfo=U),
            "ok",
            b"",
            None,
        ),
        (60, "NoAudit", None, None, None, None, T(2019, 10, 3, 14, 25, 32, tzinfo=U), None, b"", None),
    ],
    "percona-audit/psmysql-docs_audit-log-filter_8.0_OLD-xml.xml": [
        (3, "Audit", None, None, None, None, T(2023, 3, 29, 11, 15, 52), None, b"", None),
        (8, "Command Start", None, None, None, 1, T(2023, 3, 29, 11, 15, 53), "ok", b"", None),
        (
            15,
            "Query",
            "root",
            "localhost",
            None,
            11,
            T(2023, 3, 29, 11, 15, 53),
            "ok",
            b"CREATE TABLE t1 (c1 INT)",
            None,
        ),
        (
            27,
            "Query Start",
            None,
            None,
            None,
            11,
            T(2023, 3, 29, 11, 15, 53),
            "ok",
            b"CREATE TABLE t1 (c1 INT)",
            None,
        ),
        (
            35,
            "Query Status End",
            None,
            None,
            None,
            11,
            T(2023, 3, 29, 11, 15, 53),
            "ok",
            b"CREATE TABLE t1 (c1 INT)",
            None,
        ),
        (
            43,
            "Query",
            "root",
            "localhost",
            None,
            11,
            T(2023, 3, 29, 11, 15, 53),
            "ok",
            b"CREATE TABLE t1 (c1 INT)",
            None,
        ),
        (55, "Command End", None, None, None, 1, T(2023, 3, 29, 11, 15, 53), "ok", b"", None),
    ],
    "percona-audit/psmysql-docs_audit-log-plugin_OLD-xml_query_indented.xml.txt": [
        (
            1,
            "Query",
            "root",
            "localhost",
            None,
            3,
            T(2021, 6, 30, 11, 57, 14, tzinfo=U),
            "ok",
            b"select * from information_schema.PLUGINS where PLUGIN_NAME like '%audit%'",
            None,
        ),
    ],
    "percona-audit/psmysql-docs_audit-log-plugin_NEW-xml_query_indented_no-close-tag.xml.txt": [
        ("PROBLEM", 1, "unfinished record at the end"),  # the documentation cut the sample short
    ],
    "percona-audit/psmysql-docs_audit-log-plugin_OLD-xml_connect_annotated-with-comments.xml.txt": [
        ("PROBLEM", 1, "not a readable audit record"),  # ";; comments" inside the tag
    ],
}


@needs_corpus
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_samples_give_exactly_these_records(name: str) -> None:
    data = (CORPUS / name).read_bytes()
    assert recognise(data[:1024])
    assert summary(parse(data)) == EXPECTED[name]


@needs_corpus
def test_every_xml_sample_of_the_corpus_parses_without_an_exception() -> None:
    files = [
        p for p in CORPUS.rglob("*") if p.is_file() and (p.suffix == ".xml" or p.name.endswith(".xml.txt"))
    ]
    assert len(files) >= 12
    for path in files:
        data = path.read_bytes()
        assert recognise(data[:1024]), path.name
        items = parse(data)
        assert items, path.name
        records = [i for i in items if isinstance(i, LogRecord)]
        assert all(r.raw.startswith(b"<AUDIT_RECORD") for r in records)


@needs_corpus
def test_other_formats_of_the_corpus_are_not_taken_for_xml() -> None:
    for path in CORPUS.rglob("*"):
        if path.is_file() and "xml" not in path.name and path.name not in ("README.md", "PROVENANCE.md"):
            assert not recognise(path.read_bytes()[:1024]), path.name


def test_a_refused_login_is_denied_with_its_error_code_kept_and_the_account_is_split() -> None:
    data = (
        b'<?xml version="1.0" encoding="utf-8"?>\n<AUDIT>\n'
        b'<AUDIT_RECORD NAME="Connect" TIMESTAMP="2026-01-05T09:00:00 UTC" CONNECTION_ID="9" STATUS="1045"'
        b' USER="mallory" PRIV_USER="" HOST="evil.example" IP="10.0.0.66" DB=""/>\n'
        b'<AUDIT_RECORD NAME="Query" TIMESTAMP="2026-01-05T09:00:01 UTC" CONNECTION_ID="10" STATUS="0"'
        b' USER="bob[robert] @ db1 [10.0.0.8]"'
        b' SQLTEXT="DELETE FROM shop.orders WHERE note = &quot;a/&gt;b&quot;"/>\n'
    )
    refused, delete = parse(data)
    assert (refused.command, refused.user, refused.host, refused.ip, refused.status) == (
        "Connect", "mallory", "evil.example", "10.0.0.66", "denied",
    )  # fmt: skip
    assert refused.extra["status"] == "1045"
    assert (delete.user, delete.host, delete.ip, delete.extra["account"]) == (
        "robert",
        "db1",
        "10.0.0.8",
        "bob",
    )
    assert delete.argument == b'DELETE FROM shop.orders WHERE note = "a/>b"'


def test_one_line_documents_and_records_split_over_reads_are_read_alike() -> None:
    one_line = (
        b"<AUDIT><AUDIT_RECORD><NAME>Query</NAME><CONNECTION_ID>3</CONNECTION_ID>"
        b'<SQLTEXT>SELECT 1</SQLTEXT></AUDIT_RECORD><AUDIT_RECORD NAME="Quit" CONNECTION_ID="3"/></AUDIT>\n'
    )
    items = parse(one_line)
    quit_at = one_line.index(b'<AUDIT_RECORD NAME="Quit"')
    assert [(i.command, i.connection_id, i.offset) for i in items] == [("Query", 3, 7), ("Quit", 3, quit_at)]


def test_hostile_records_become_problems_or_records_never_exceptions() -> None:
    billion_laughs = (
        b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>\n'
        b"<AUDIT>\n<AUDIT_RECORD><NAME>Query</NAME><SQLTEXT>&lol2;</SQLTEXT></AUDIT_RECORD>\n"
        b'<AUDIT_RECORD NAME="Query" SQLTEXT="x"><!ENTITY e SYSTEM "file:///etc/passwd"></AUDIT_RECORD>\n'
        b'<AUDIT_RECORD NAME="Query" SQLTEXT="\xff\xfe bad utf-8 \x00 nul"/>\n'
        b'<AUDIT_RECORD NAME="Query" SQLTEXT="unterminated\n'
    )
    items = parse(billion_laughs)
    kinds = [("P", i.line) if isinstance(i, Problem) else ("R", i.line, i.argument) for i in items]
    assert kinds == [
        ("P", 2),  # the DOCTYPE is no record
        ("P", 4),  # &lol2; is declared nowhere a record can see: not expanded
        ("P", 5),  # a declaration inside a record
        ("R", 6, "\ufffd\ufffd bad utf-8  nul".encode()),  # kept, readable; raw keeps the bytes
        ("P", 7),  # unfinished at the end
    ]
    assert items[3].raw.endswith(b'\xff\xfe bad utf-8 \x00 nul"/>\n'[:-1])


def test_a_record_over_the_size_bound_is_skipped_with_a_problem_and_reading_goes_on() -> None:
    chunk = b"x" * (MAX_RECORD_BYTES // 64) + b"\n"
    big = b"<AUDIT_RECORD><SQLTEXT>\n" + chunk * 70 + b"</SQLTEXT></AUDIT_RECORD>\n"
    data = big + b'<AUDIT_RECORD NAME="Quit" CONNECTION_ID="4"/>\n'
    items = list(xml_audit.parse(iter(data.splitlines(keepends=True))))
    assert isinstance(items[0], Problem) and "longer than" in items[0].reason
    assert len(items) == 2
    assert isinstance(items[-1], LogRecord) and items[-1].command == "Quit"


def test_random_bytes_never_raise() -> None:
    rng = random.Random(7)
    pieces = [
        b"<AUDIT_RECORD",
        b"/>",
        b">",
        b'"',
        b"</AUDIT_RECORD>",
        b"<NAME>",
        b"\n",
        b"\x00",
        b"\xff",
        b"x",
    ]
    for _ in range(300):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        for item in xml_audit.parse(data.splitlines(keepends=True)):
            assert isinstance(item, LogRecord | Problem)


def test_memory_stays_bounded_on_a_long_log() -> None:
    record = (
        b'<AUDIT_RECORD NAME="Query" TIMESTAMP="2026-01-05T09:00:00 UTC" CONNECTION_ID="7" STATUS="0"'
        b' USER="app[app] @ web1 [10.0.0.2]" SQLTEXT="SELECT * FROM shop.orders WHERE id = 1"/>\n'
    )
    lines = (record for _ in range(20_000))
    tracemalloc.start()
    count = sum(1 for _ in xml_audit.parse(lines))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count == 20_000
    assert peak < len(record) * 20_000 / 4  # well below the 3.6 MB the log holds


def test_the_attribute_fast_path_reads_exactly_what_elementtree_reads() -> None:
    from ingest.parsers.xml_audit import _element, _fast_fields, _fields

    rng = random.Random(5)
    pieces = [
        "a",
        " ",
        "\t",
        "\n",
        "&lt;",
        "&gt;",
        "&amp;",
        "&quot;",
        "&apos;",
        "&#10;",
        "&#x9;",
        "é",
        "'",
        "/>",
    ]
    for _ in range(300):
        value = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        conn = rng.randint(1, 9)
        raw = f'<AUDIT_RECORD NAME="Query" CONNECTION_ID="{conn}" SQLTEXT="{value}"\n  USER="u"/>\n'
        fast = _fast_fields(raw.encode())
        assert fast is not None, raw
        assert fast == _fields(_element(raw.encode()))[0], raw
    # What it does not fully understand goes to ElementTree.
    for raw in (
        b'<AUDIT_RECORD A="&unknown;"/>',
        b'<AUDIT_RECORD A="1" A="2"/>',
        b"<AUDIT_RECORD><NAME>x</NAME>",
    ):
        assert _fast_fields(raw) is None


def test_a_line_that_is_one_record_reads_exactly_as_the_scanner_reads_it(monkeypatch) -> None:
    """One-line OLD records take a shortcut past the scanner: same records, same positions."""
    rng = random.Random(11)
    pieces = [
        "a",
        " ",
        "\t",
        "&lt;",
        "&amp;",
        "&quot;",
        "&#10;",
        "é",
        "'",
        "/>",
        "\\",
        "&bogus;",
        "<",
        "\x01",
    ]
    lines = [b'<?xml version="1.0" encoding="utf-8"?>\n', b"<AUDIT>\n"]
    for n in range(300):
        value = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        name = rng.choice(["NAME", "name", "Name"])
        lead = rng.choice(["", "  ", "\t"])
        end = rng.choice(["\n", "\r\n", " \n", ""])
        lines.append(
            f'{lead}<AUDIT_RECORD {name}="Query" RECORD="{n}" CONNECTION_ID="{n % 7}" '
            f'USER="u[u] @ h [1.2.3.4]" SQLTEXT="{value}"/>{end}'.encode()
        )
        if rng.random() < 0.05:
            lines.append(b"stray bytes\n")
    lines.append(b"</AUDIT>\n")
    shortcut = list(xml_audit.parse(lines))
    monkeypatch.setattr(xml_audit, "_WHOLE_OLD_LINE", re.compile(b"(?!)"))  # no line takes it
    scanner = list(xml_audit.parse(lines))
    assert [_comparable(item) for item in shortcut] == [_comparable(item) for item in scanner]
    assert sum(isinstance(item, LogRecord) for item in shortcut) > 100
    assert any(isinstance(item, Problem) for item in shortcut)


def _comparable(item: object) -> object:
    if isinstance(item, Problem):
        return ("problem", item.line, item.offset, item.raw, item.reason)
    assert isinstance(item, LogRecord)
    return (
        item.line,
        item.offset,
        item.raw,
        item.command,
        item.argument,
        item.user,
        item.host,
        item.ip,
        item.extra,
    )
