"""Oracle's exports (SQLcl CSV and JSON of UNIFIED_AUDIT_TRAIL, the traditional XML audit file):
every record of the scene's samples, and hostile input. The samples are written from the rows of
tests/fixtures/oracle_scene/scene.py in the layouts Oracle documents (no Oracle server here)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ingest.parsers import by_name, dialect_of
from ingest.parsers.detect import HEAD_BYTES, detect_format
from ingest.parsers.oracle_audit import parse_time
from ingest.parsers.oracle_xml import ACTIONS
from ingest.parsers.records import LogRecord, Problem, ServerStart

from ..conftest import FIXTURES
from ..fixtures.oracle_scene.scene import ROWS, nls, to_csv, to_json, to_xml

SAMPLES = {
    "oracle-csv": FIXTURES / "oracle-csv/unified-scene.csv",
    "oracle-json": FIXTURES / "oracle-json/unified-scene.json",
    "oracle-xml": FIXTURES / "oracle-xml/ora_1234_1.xml",
}
WRITERS = {"oracle-csv": to_csv, "oracle-json": to_json, "oracle-xml": to_xml}
XML_ACTIONS = set(ACTIONS.values())


def items(fmt: str, data: bytes) -> list[object]:
    return list(by_name(fmt).parse(data.splitlines(keepends=True)))


def expected_rows(fmt: str) -> list[dict[str, object]]:
    return [r for r in ROWS if fmt != "oracle-xml" or r["ACTION_NAME"] in XML_ACTIONS]


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_the_samples_are_the_scene_written_and_recognised(fmt: str) -> None:
    data = SAMPLES[fmt].read_bytes()
    assert data == WRITERS[fmt](ROWS)  # (regenerate with scene.py when ROWS change)
    assert detect_format(data[:HEAD_BYTES]) == fmt
    assert dialect_of(fmt) == "oracle"


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_it_reads_every_row_of_the_scene(fmt: str) -> None:
    data = SAMPLES[fmt].read_bytes()
    got = items(fmt, data)
    assert [i for i in got if isinstance(i, Problem)] == []
    rows = expected_rows(fmt)
    assert len(got) == len(rows)
    for item, row in zip(got, rows, strict=True):
        assert data[item.offset : item.offset + len(item.raw)] == item.raw  # its own bytes
        if row["ACTION_NAME"] == "STARTUP":
            assert isinstance(item, ServerStart)
            continue
        assert isinstance(item, LogRecord)
        assert item.occurred_at == row["EVENT_TIMESTAMP_UTC"].replace(tzinfo=UTC)
        assert item.connection_id == row["SESSIONID"]
        assert item.user == row["DBUSERNAME"]
        assert item.host == row["USERHOST"]
        assert item.argument.decode() == (row["SQL_TEXT"] or "")
        assert item.extra["action_name"] == row["ACTION_NAME"]
        assert item.extra.get("scn") == (str(row["SCN"]) if row["SCN"] is not None else None)
        assert item.extra.get("transaction_id") == row["TRANSACTION_ID"]
        assert item.extra.get("sql_binds") == row["SQL_BINDS"]
        assert item.extra.get("os_user") == row["OS_USERNAME"]
        table = f"{row['OBJECT_SCHEMA']}.{row['OBJECT_NAME']}" if row["OBJECT_SCHEMA"] else row["OBJECT_NAME"]
        assert item.objects == ((table,) if table else ())
        expected = {"LOGON": "Connect", "LOGOFF": "Quit"}.get(str(row["ACTION_NAME"]), "Query")
        assert item.command == expected
        if row["RETURN_CODE"]:
            assert item.status == ("denied" if expected == "Connect" else str(row["RETURN_CODE"]))
        else:
            assert item.status == "ok"


def test_the_client_address_gives_the_ip_of_a_logon() -> None:
    got = [i for i in items("oracle-csv", SAMPLES["oracle-csv"].read_bytes()) if isinstance(i, LogRecord)]
    logons = [(i.user, i.ip, i.status) for i in got if i.command == "Connect"]
    assert logons == [
        ("SCOTT", "10.0.0.5", "ok"),
        ("MALLORY", "203.0.113.9", "denied"),
        ("MALLORY", "203.0.113.9", "ok"),
        ("SCOTT", "10.0.0.5", "ok"),
    ]


@pytest.mark.parametrize(
    ("text", "utc", "expected"),
    [
        ("20-NOV-26 08.06.10.250000 AM", True, datetime(2026, 11, 20, 8, 6, 10, 250000, tzinfo=UTC)),
        ("20-NOV-26 12.00.00.000000000 AM", True, datetime(2026, 11, 20, 0, 0, tzinfo=UTC)),
        ("20-NOV-26 12.30.00.5 PM", True, datetime(2026, 11, 20, 12, 30, 0, 500000, tzinfo=UTC)),
        ("01-JAN-99 01.00.00 PM", True, datetime(1999, 1, 1, 13, 0, tzinfo=UTC)),  # RR: 50-99 last century
        ("2026-11-20T08:06:10.250000Z", False, datetime(2026, 11, 20, 8, 6, 10, 250000, tzinfo=UTC)),
        ("2026-11-20 09:06:10.25 +01:00", False, datetime(2026, 11, 20, 8, 6, 10, 250000, tzinfo=UTC)),
        ("2026-11-20 08:06:10", False, datetime(2026, 11, 20, 8, 6, 10)),  # local: the source's zone
        ("20-XYZ-26 08.06.10 AM", True, None),
        ("20-NOV-26 13.06.10 PM", True, None),
        ("yesterday", True, None),
        ("9" * 500, True, None),
    ],
)
def test_it_reads_times_as_sqlcl_and_the_xml_file_write_them(text: str, utc: bool, expected: object) -> None:
    assert parse_time(text, utc=utc) == expected


def test_the_default_nls_format_is_what_the_samples_hold() -> None:
    assert nls(datetime(2026, 11, 20, 20, 5, 1, 7)) == "20-NOV-26 08.05.01.000007 PM"


# -- hostile input ---------------------------------------------------------------------------------


def test_a_csv_quote_left_open_is_one_problem_not_a_forged_record() -> None:
    good = to_csv(ROWS[:3])
    header, first, second, third = good.splitlines(keepends=True)
    broken = first.replace(b'"deploy"', b'"dep"loy', 1) if b'"deploy"' in first else second[:40] + b'"\n'
    got = items("oracle-csv", header + broken + second + third)
    problems = [i for i in got if isinstance(i, Problem)]
    assert problems and all(len(p.raw) <= 2048 for p in problems)
    assert all(not isinstance(i, LogRecord) or i.user in ("SCOTT", "SYS") for i in got)


def test_a_csv_row_with_the_wrong_number_of_fields_is_a_problem() -> None:
    data = to_csv(ROWS[:2]) + b'"Standard",1,2\n'
    got = items("oracle-csv", data)
    assert isinstance(got[-1], Problem) and "3 fields where the header names 25 columns" in got[-1].reason


def test_a_csv_read_that_starts_past_the_header_says_so() -> None:
    data = to_csv(ROWS[:3])
    second = data.index(b"\n") + 1
    got = list(by_name("oracle-csv").parse(data[second:].splitlines(keepends=True), start_offset=second))
    assert len(got) == 1 and isinstance(got[0], Problem) and "no header line" in got[0].reason


def test_a_json_read_may_resume_at_any_row() -> None:
    data = to_json(ROWS)
    whole = items("oracle-json", data)
    third = whole[3]
    lines = data[third.offset :].splitlines(keepends=True)
    resumed = list(by_name("oracle-json").parse(lines, start_offset=third.offset, start_line=third.line))
    assert [(i.offset, i.raw) for i in resumed] == [(i.offset, i.raw) for i in whole[3:]]


def test_json_rows_on_one_line_and_braces_in_strings() -> None:
    data = (
        b'{"results":[{"columns":[{"name":"ACTION_NAME","type":"VARCHAR2"}],"items":['
        b'{"event_timestamp_utc":"2026-11-20 08:00:00","action_name":"DELETE","sessionid":7,'
        b'"sql_text":"DELETE FROM t WHERE x = \'}\\"{\'"},{"event_timestamp_utc":"2026-11-20 08:00:01",'
        b'"action_name":"UPDATE","sessionid":7,"sql_text":"UPDATE t SET a = 1"}]}]}\n'
    )
    got = items("oracle-json", data)
    assert [i.argument for i in got] == [b"DELETE FROM t WHERE x = '}\"{'", b"UPDATE t SET a = 1"]
    assert all(data[i.offset : i.offset + len(i.raw)] == i.raw for i in got)


def test_json_garbage_between_rows_and_a_cut_row_are_problems() -> None:
    data = to_json(ROWS[:2]).replace(b"\n,{", b"\nnonsense\n,{", 1)
    cut = to_json(ROWS[:2])[:-40]
    assert any(isinstance(i, Problem) and "not a row object" in i.reason for i in items("oracle-json", data))
    got = items("oracle-json", cut)
    assert isinstance(got[-1], Problem) and "unfinished row" in got[-1].reason


def test_an_xml_record_with_a_dtd_is_refused_and_entities_are_not_expanded() -> None:
    bomb = (
        b'<AuditRecord><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">]><Session_Id>1</Session_Id>'
        b"<Extended_Timestamp>2026-11-20T08:00:00.000000Z</Extended_Timestamp><Action>7</Action>"
        b"<Sql_Text>&a;</Sql_Text></AuditRecord>\n"
    )
    got = items("oracle-xml", bomb)
    assert len(got) == 1 and isinstance(got[0], Problem) and "DTD" in got[0].reason


def test_an_xml_record_cut_short_by_the_next_is_a_problem_and_the_next_is_read() -> None:
    data = to_xml(ROWS[1:4])
    first = data.index(b"<AuditRecord>")
    second = data.index(b"<AuditRecord>", first + 1)
    broken = data[:first] + data[first : second - 30] + b"\n" + data[second:]
    got = items("oracle-xml", broken)
    assert isinstance(got[0], Problem) and got[0].reason == "record cut short"
    assert [i.extra["action_name"] for i in got[1:]] == ["SELECT", "DELETE"]


def test_a_huge_record_is_a_bounded_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    from ingest.parsers import oracle_csv, oracle_json

    monkeypatch.setattr(oracle_csv, "MAX_RECORD_BYTES", 4096)
    monkeypatch.setattr(oracle_json, "MAX_RECORD_BYTES", 4096)
    big = [dict(ROWS[3], SQL_TEXT="DELETE FROM t WHERE x IN (" + "1," * 5000 + "1)")]
    for fmt, data in (("oracle-csv", to_csv(big)), ("oracle-json", to_json(big))):
        got = items(fmt, data)
        assert len(got) == 1 and isinstance(got[0], Problem) and len(got[0].raw) <= 2048, fmt


def test_a_row_without_a_readable_time_is_a_problem_naming_it() -> None:
    got = items("oracle-csv", to_csv([dict(ROWS[3], EVENT_TIMESTAMP_UTC=None)]))
    assert isinstance(got[0], Problem) and "no readable EVENT_TIMESTAMP_UTC" in got[0].reason
