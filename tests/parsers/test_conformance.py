"""Every format AuditWeb reads, against our own samples: exact records, then ingested end to end.

tests/fixtures/<format>/ holds a sample written from one story told to a private MariaDB
(tests/fixtures/conformance.py; PROVENANCE.md says which bytes the server wrote and which
layouts are ours) and truth.json: every record of it, found in the file by what the story
sent, with who sent it, the outcome and the moments it was sent and answered. These need
neither ../shared nor a server: a fresh clone tests every format.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command

from ingest.parsers import NAMES, by_name, reads_bytes
from ingest.parsers.records import LogRecord, Problem, ServerStart
from ingest.sql.secrets import mask_secrets

from ..conftest import FIXTURES

FORMATS = [fmt for fmt in NAMES if (FIXTURES / fmt / "truth.json").exists()]
# Formats whose samples are a crime scene's files (tests/fixtures/<scene>/truth.json names them
# under "formats"): that scene's own tests compare every record (the pgAudit scene:
# tests/parsers/test_pgaudit*.py, tests/test_pgaudit_scene.py); here each must have its files.
SCENE_FORMATS: dict[str, list[Any]] = {}
for _scene in sorted(FIXTURES.glob("*/truth.json")):
    for _fmt, _names in json.loads(_scene.read_text()).get("formats", {}).items():
        SCENE_FORMATS.setdefault(_fmt, []).extend(_scene.parent / n for n in _names)
TRUTH = {fmt: json.loads((FIXTURES / fmt / "truth.json").read_text()) for fmt in FORMATS}
SAMPLES = [(fmt, name) for fmt, truth in TRUTH.items() for name in truth["files"]]
# Layouts whose raw bytes escape the statement (a quote, a newline...): its text is not in them as is.
ESCAPING = {"general-log-csv", "general-log-tsv", "mariadb-audit", "json-audit", "xml-audit", "audit-csv"}
MICROSECONDS = {"general-log-csv", "general-log-tsv"}  # the others write whole seconds


def records_of(fmt: str, name: str) -> list[dict[str, Any]]:
    return [r for r in TRUTH[fmt]["records"] if r["file"] == name]


def sql_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def parsed(fmt: str, name: str) -> tuple[bytes, list[LogRecord], list[Problem]]:
    data = (FIXTURES / fmt / name).read_bytes()
    items = list(by_name(fmt).parse(io.BytesIO(data)))
    return (
        data,
        [i for i in items if isinstance(i, LogRecord)],
        [i for i in items if isinstance(i, Problem)],
    )


def as_utc(when: datetime | None) -> datetime | None:
    """The samples' times are UTC (the private server ran in UTC): naive ones are read so."""
    return when if when is None or when.tzinfo else when.replace(tzinfo=UTC)


def in_window(when: datetime | None, record: dict[str, Any], fmt: str) -> bool:
    sent, done = datetime.fromisoformat(record["sent_at"]), datetime.fromisoformat(record["done_at"])
    if when is None:
        return False
    if fmt in MICROSECONDS:
        slack = timedelta(milliseconds=5)
        return sent - slack <= when <= done + slack
    return sent.replace(microsecond=0) <= when <= done


def view(r: LogRecord) -> tuple[Any, ...]:
    return (r.line, r.offset, r.connection_id, r.command, r.argument, r.user, r.host, r.database, r.status)


def expected_view(e: dict[str, Any]) -> tuple[Any, ...]:
    return (
        e["line"],
        e["offset"],
        e["connection_id"],
        e["command"],
        sql_bytes(e["sql"]),
        e["user"],
        e["host"],
        e["database"],
        e["status"],
    )


# Where a sample shows a parser bug: (format, file) -> the reason (ingest/ is not ours to change here).
KNOWN_BUGS: dict[tuple[str, str], str] = {}


def known(fmt: str, name: str) -> None:
    if (fmt, name) in KNOWN_BUGS:
        pytest.xfail(KNOWN_BUGS[(fmt, name)])


# A binary format has no records of lines: its truth is its own scene (the binlog's: tests/binlog/).
LINE_FORMATS = [fmt for fmt in NAMES if not reads_bytes(by_name(fmt))]


def test_every_registered_format_has_its_own_samples() -> None:
    # a binary format (the binlog) has its scene and tests under tests/binlog/
    covered = [fmt for fmt in NAMES if fmt in FORMATS or fmt in SCENE_FORMATS or fmt not in LINE_FORMATS]
    assert list(NAMES) == covered, (
        f"no tests/fixtures/<format>/truth.json, nor a scene's, for {set(NAMES) - set(covered)}"
    )
    for fmt, paths in SCENE_FORMATS.items():
        assert fmt in NAMES and paths, fmt
        for path in paths:
            items = list(by_name(fmt).parse(io.BytesIO(path.read_bytes())))
            assert [i for i in items if isinstance(i, Problem)] == [], path.name
            assert sum(isinstance(i, LogRecord) for i in items) >= 10, path.name


@pytest.mark.parametrize(("fmt", "name"), SAMPLES)
def test_every_sample_has_a_truth_for_each_of_its_records(fmt: str, name: str) -> None:
    truth = records_of(fmt, name)
    assert len(truth) >= 20
    data = (FIXTURES / fmt / name).read_bytes()
    assert len(data) < 50_000, "keep the samples small"
    for e in truth:
        # The truth's places were found by searching the file, not by our parsers: each is the
        # start of a line, in order.
        assert e["offset"] == 0 or data[e["offset"] - 1 : e["offset"]] == b"\n", e
    assert [e["offset"] for e in truth] == sorted({e["offset"] for e in truth})


@pytest.mark.parametrize(("fmt", "name"), SAMPLES)
def test_it_reads_every_record_exactly_as_the_server_logged_it(fmt: str, name: str) -> None:
    known(fmt, name)
    data, got, problems = parsed(fmt, name)
    assert problems == []
    truth = records_of(fmt, name)
    assert [view(r) for r in got] == [expected_view(e) for e in truth]
    for r, e in zip(got, truth, strict=True):
        assert in_window(as_utc(r.occurred_at), e, fmt), (r.occurred_at, e["sent_at"], e["done_at"])
        assert data[r.offset : r.offset + len(r.raw)] == r.raw


def test_the_general_log_opens_with_the_private_servers_start_banner() -> None:
    name = TRUTH["general-log"]["files"][0]
    items = list(by_name("general-log").parse(io.BytesIO((FIXTURES / "general-log" / name).read_bytes())))
    assert isinstance(items[0], ServerStart)
    assert items[0].version.startswith(TRUTH["general-log"]["server_version"])
    assert not any(isinstance(i, ServerStart) for i in items[1:])


def test_the_hostile_statement_is_in_every_sample_as_its_layout_writes_it() -> None:
    """Quote, backslash, tab, newline and NUL: the server's logs keep every byte; Percona's XML
    writes NUL as `?`; a byte that is no UTF-8 is kept raw by the server, as \\xFF by the table,
    and as `?` by the layouts that convert to utf8mb4."""
    for fmt, truth in TRUTH.items():
        inserts = [e["sql"] for e in truth["records"] if e["sql"].startswith("INSERT INTO customers")]
        assert len(inserts) == len(truth["files"]), fmt
        for sql in inserts:
            assert "O\\'Brien \\\\ back\ttab\nnew line" in sql
            assert ("?nul" if fmt == "xml-audit" else "\x00nul") in sql
        comments = [e["sql"] for e in truth["records"] if "not utf-8" in e["sql"]]
        marks = {"/* \udcff not", "/* \\xFF not", "/* ? not"}
        assert all(any(m in sql for m in marks) for sql in comments), fmt


def test_the_secret_is_in_clear_only_where_the_server_wrote_it_so() -> None:
    for fmt, truth in TRUTH.items():
        created = [e["sql"] for e in truth["records"] if e["sql"].startswith("CREATE USER 'eve'")]
        assert created, fmt
        clear = fmt in ("general-log", "general-log-csv", "general-log-tsv")
        assert all(("S3cret" in sql) == clear for sql in created), fmt
        assert all("S3cret" not in mask_secrets(sql) for sql in created), fmt


# -- ingested end to end -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ingested(django_db_setup, django_db_blocker):
    """Every sample ingested once with `manage.py ingest` under its own server label."""
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)
        summaries = {}
        for fmt, name in SAMPLES:
            out = io.StringIO()
            call_command(
                "ingest",
                str(FIXTURES / fmt / name),
                "--format",
                fmt,
                "--server",
                server_of(fmt, name),
                "--timezone",
                "UTC",
                stdout=out,
            )
            summaries[name] = out.getvalue()
        yield summaries
        call_command("flush", interactive=False, verbosity=0)


def server_of(fmt: str, name: str) -> str:
    return f"conformance-{fmt}-{name}"


def expected_attribution(fmt: str, e: dict[str, Any]) -> str:
    """The general log file names the account on Connect records only; every other record of
    every other format names it."""
    if fmt == "general-log" and e["command"] != "Connect":
        return "connect"
    return "record"


@pytest.mark.django_db
@pytest.mark.parametrize(("fmt", "name"), SAMPLES)
def test_ingest_stores_each_record_once_with_its_account_and_labels(ingested, fmt: str, name: str) -> None:
    from ingest.models import Event
    from ingest.normalize import decode_sql
    from ingest.textsafe import displayable

    known(fmt, name)
    assert ", 0 problems," in ingested[name], ingested[name]
    truth = {e["offset"]: e for e in records_of(fmt, name)}
    # The host a session's records name (the general log: its Connect); its events carry it.
    hosts = {e["session"]: e["host"] for e in truth.values() if e["host"]}
    events = list(
        Event.objects.filter(server=server_of(fmt, name))
        .exclude(command="Server start")
        .order_by("byte_offset")
    )
    assert [e.byte_offset for e in events] == sorted(truth)
    sessions: dict[str, set[int]] = {}
    for event in events:
        e = truth[event.byte_offset]
        assert (event.line, event.connection_id, event.command) == (
            e["line"],
            e["connection_id"],
            e["command"],
        )
        assert (event.user, event.host) == (e["session"].split("#")[0], hosts.get(e["session"])), e
        assert event.attribution == expected_attribution(fmt, e), e
        # Stored as text: NUL left out and a byte that is no UTF-8 as U+FFFD (the raw bytes keep both).
        assert event.sql == displayable(mask_secrets(decode_sql(sql_bytes(e["sql"])))), e
        assert bytes(event.raw).find(sql_bytes(e["sql"]).split(b"\n")[0][:40]) >= 0 or fmt in ESCAPING, e
        assert "S3cret" not in event.sql
        assert event.destructive == e["destructive"], e
        if e["command"] == "Query" and e["by"] == "story":
            assert event.statement_type == e["statement_type"], e
        assert in_window(event.occurred_at, e, fmt), (event.occurred_at, e)
        sessions.setdefault(e["session"], set()).add(event.session_id)
    # One stored session per connection of the story, and no two connections share one.
    assert all(len(ids) == 1 for ids in sessions.values()), sessions
    assert len({i for ids in sessions.values() for i in ids}) == len(sessions)


@pytest.mark.django_db
def test_every_format_answers_who_destroyed_shop_orders_the_same(ingested) -> None:
    from ingest.models import Event

    answers = {}
    for fmt, name in SAMPLES:
        rows = Event.objects.filter(server=server_of(fmt, name), destructive=True, command="Query")
        answers[name] = sorted((e.user, e.connection_id, e.sql) for e in rows if "orders" in e.sql)
    first = next(iter(answers.values()))
    assert [(u, sql) for u, _, sql in first] == [
        ("alice", "UPDATE orders SET total = 11.00 WHERE id = 1"),
        ("bob", "DELETE FROM orders"),
        ("bob", "DELETE FROM orders WHERE id = 3"),
    ]
    assert all(a == first for a in answers.values()), answers
