"""The pgAudit crime scene, ingested with `manage.py ingest` and asked as an investigator would.

tests/fixtures/pgaudit_scene/ holds what a real PostgreSQL 15 with pgAudit wrote (stderr,
csvlog and jsonlog, before and after a log rotation) and truth.json: every statement the story
ran, with its session, user, rows and SQLSTATE, and whether pgAudit logs it (and why not).
Each layout is ingested under its own server label; every answer is compared with the truth's
statements that the log can show (pgAudit's, and the server's ERROR of a failed one).
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from ingest.follow import ingest_source
from ingest.models import Event, Gap, IngestRun, ParseProblem, Session, Source
from ingest.normalize import GapFinder, SessionTracker
from ingest.parsers.pgaudit import session_number
from ingest.pipeline import ingest_file, source_for_path
from investigations.query.filters import filter_events

from .conftest import FIXTURES
from .parsers.test_pgaudit import interleaved

SCENE = FIXTURES / "pgaudit_scene"
TRUTH = json.loads((SCENE / "truth.json").read_text())
FORMATS = sorted(TRUTH["formats"])
STATEMENTS: list[dict[str, Any]] = TRUTH["statements"]


def server_of(fmt: str) -> str:
    return f"pg-{fmt}"


def in_the_log(s: dict[str, Any]) -> bool:
    """Whether the log shows the statement: pgAudit logged it, or it failed (the server logs
    the ERROR with its statement, log_min_error_statement's default)."""
    return s["audited"] is True or s["sqlstate"] is not None


def logged_text(s: dict[str, Any]) -> str:
    """The text the event holds: the statement, or the sub-statement pgAudit logged for it
    (a function pgAudit does not log itself), unless it failed (the ERROR names the call)."""
    return s["logged_as"] if s["logged_as"] and s["sqlstate"] is None else s["sql"]


def expected(s: dict[str, Any], fmt: str) -> tuple[Any, ...]:
    """What the event of statement `s` says: who, on which session, what, and the outcome (a
    stderr log whose prefix has no %e tells a failure, not its SQLSTATE)."""
    failed = "error" if fmt == "pgaudit-stderr" else s["sqlstate"]
    return (s["user"], session_number(s["session"]), logged_text(s), failed if s["sqlstate"] else "ok")


def destroys(s: dict[str, Any]) -> bool:
    """Whether the statement removes or overwrites data, by its verb (a function that writes:
    by what its body wrote, the truth's `writes`)."""
    verb = s["sql"].split()[0]
    if verb == "SELECT":
        return bool(s["writes"]) and s["logged_as"] is not None
    return verb in ("DELETE", "UPDATE", "MERGE", "TRUNCATE") or s["sql"].startswith(
        ("DROP TABLE", "ALTER TABLE")
    )


def answer(fmt: str, **params: Any) -> list[Event]:
    if "statement_type" in params:
        params["statement_type"] = [params["statement_type"]]  # repeatable
    found = filter_events({**params, "server": server_of(fmt)})
    assert found.is_valid(), found.errors
    return list(
        found.qs.exclude(command__in=("Connect", "Quit", "Server start")).order_by("occurred_at", "id")
    )


def seen(events: list[Event]) -> list[tuple[Any, ...]]:
    return [(e.user, e.connection_id, e.sql, e.status) for e in events]


def files(fmt: str) -> list[Path]:
    return [SCENE / name for name in TRUTH["formats"][fmt]]


@pytest.fixture(scope="module")
def scene(django_db_setup, django_db_blocker):
    """Each layout's two files ingested once with `manage.py ingest --format auto`."""
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)
        for fmt in FORMATS:
            out = io.StringIO()
            paths = [str(p) for p in files(fmt)]
            call_command("ingest", *paths, "--server", server_of(fmt), "--timezone", "UTC", stdout=out)
            assert ", 0 problems," in out.getvalue(), out.getvalue()
        yield
        call_command("flush", interactive=False, verbosity=0)


pytestmark = [pytest.mark.django_db, pytest.mark.parametrize("fmt", FORMATS)]


def test_auto_detection_read_each_file_in_its_format(scene, fmt: str) -> None:
    stored = {s.format for s in Source.objects.filter(server=server_of(fmt))}
    assert stored == {"auto"}
    texts = Counter(
        Event.objects.filter(server=server_of(fmt), command="Query").values_list("sql", flat=True)
    )
    truth = Counter(logged_text(s) for s in STATEMENTS if in_the_log(s))
    # The scene's cluster creates its database before the story begins (regenerate.py).
    assert texts - truth == Counter(["CREATE DATABASE shop"]) + Counter(
        t for t in texts if "PASSWORD" in t
    )  # (passwords are stored masked)
    assert truth - texts == Counter(t for t in truth if "PASSWORD" in t)


def test_who_deleted_from_shop_orders(scene, fmt: str) -> None:
    truth = [
        expected(s, fmt)
        for s in STATEMENTS
        if in_the_log(s) and logged_text(s).startswith("DELETE") and "shop.orders" in s["sql"]
    ]
    got = answer(fmt, table="shop.orders", statement_type="DELETE")
    assert seen(got) == truth
    assert all(e.destructive and e.tables[0] == "shop.orders" for e in got)
    rows = {logged_text(s): s["rows"] for s in STATEMENTS if s["audited"] is True}
    assert [e.rows_affected for e in got if e.status == "ok"] == [
        rows[e.sql] for e in got if e.status == "ok"
    ]
    # A bare name finds them too (pgAudit names the schema).
    assert seen(answer(fmt, table="orders", statement_type="DELETE")) == truth


def test_everything_destructive_on_shop_orders_names_the_function_that_deleted(scene, fmt: str) -> None:
    truth = [
        expected(s, fmt)
        for s in STATEMENTS
        if in_the_log(s)
        and not s["sqlstate"]
        and destroys(s)
        and "shop.orders" in s["sql"] + str(s["writes"])
    ]
    got = answer(fmt, table="shop.orders", destructive="true", flag="")
    got = [e for e in got if "failed" not in e.flags]
    assert seen(got) == truth
    purge = next(e for e in got if e.sql == logged_text(next(s for s in STATEMENTS if s["logged_as"])))
    assert purge.tables == ["shop.archive", "shop.orders"]  # the INSERT and the DELETE inside it


def test_the_rolled_back_delete_is_there_and_pgaudit_alone_cannot_tell_it_was_undone(scene, fmt: str) -> None:
    rolled = [s for s in STATEMENTS if s["rolled_back"] and s["audited"] is True]
    assert len(rolled) == 1
    got = answer(fmt, q=rolled[0]["sql"])
    assert seen(got) == [expected(rolled[0], fmt)]
    # BEGIN and ROLLBACK are class MISC, not logged in this set-up (README: log `misc` to have
    # transactions): the event is not flagged rolled_back, and the rows are what it deleted.
    assert "rolled_back" not in got[0].flags and got[0].rows_affected == rolled[0]["rows"]
    # The failed statements of the other rolled-back transaction are the server's ERRORs only.
    failed = [expected(s, fmt) for s in STATEMENTS if s["rolled_back"] and s["sqlstate"]]
    assert seen(answer(fmt, flag="not_audited", user="alice", destructive="true")) == failed


def test_the_truncate_and_the_drop_table(scene, fmt: str) -> None:
    for kind in ("TRUNCATE", "DROP TABLE"):
        truth = [expected(s, fmt) for s in STATEMENTS if in_the_log(s) and s["sql"].startswith(kind + " ")]
        got = answer(fmt, statement_type=kind)
        assert seen(got) == truth and len(truth) == 1, kind
        named = truth[0][2].split()[-1]  # the relation the statement names
        assert got[0].destructive and got[0].tables == [named], kind
        assert seen(answer(fmt, table=named, destructive="true", statement_type=kind)) == truth


def test_the_statements_after_set_pgaudit_log_none(scene, fmt: str) -> None:
    blind = [s for s in STATEMENTS if s["audited"] == "pgaudit.log is 'none' in this session"]
    assert len(blind) == 1
    # Not in the log: the table's destructive history holds only bob's refused attempt.
    refused = [
        expected(s, fmt)
        for s in STATEMENTS
        if s["sql"].startswith("DELETE FROM shop.payroll") and s["sqlstate"]
    ]
    assert seen(answer(fmt, table="shop.payroll", destructive="true")) == refused
    # The RESET that ended it is in the log, flagged, and shows the gap: from her last record before
    # it to the RESET.
    session = session_number(blind[0]["session"])
    mine = answer(fmt, connection_id=session)
    reset = next(e for e in mine if e.sql == "RESET pgaudit.log")
    assert "anti_forensic" in reset.flags
    before = [e for e in mine if e.occurred_at < reset.occurred_at][-1]
    gap = Gap.objects.get(server=server_of(fmt), line=reset.line, byte_offset=reset.byte_offset)
    assert (gap.reason, gap.started_at, gap.ended_at) == (
        "logging_off",
        before.occurred_at,
        reset.occurred_at,
    )


def test_the_server_wide_blind_spot_after_alter_system(scene, fmt: str) -> None:
    unseen = [s for s in STATEMENTS if s["audited"] == "pgaudit.log is 'none' for the server"]
    changes = list(
        Event.objects.filter(
            server=server_of(fmt), command="Config", flags__contains=["anti_forensic"]
        ).order_by("occurred_at")
    )
    assert len(changes) == 2 and changes[0].sql == 'parameter "pgaudit.log" changed to "none"'
    gap = Gap.objects.get(server=server_of(fmt), byte_offset=changes[0].byte_offset)
    assert (gap.reason, gap.started_at, gap.ended_at) == (
        "logging_off",
        changes[0].occurred_at,
        changes[1].occurred_at,
    )
    # Her session is in the log (connection lines), its DELETE not: the gap covers it.
    (mallory,) = {s["session"] for s in unseen if s["user"] == "mallory"}
    connect = Event.objects.get(
        server=server_of(fmt), connection_id=session_number(mallory), command="Connect"
    )
    assert gap.started_at <= connect.occurred_at <= gap.ended_at
    assert not any(e.sql == s["sql"] for s in unseen for e in answer(fmt, q=s["sql"]))


def test_the_anti_forensic_statements(scene, fmt: str) -> None:
    switches = re.compile(r"pgaudit\.log|log_statement|DROP EXTENSION pgaudit|pg_rotate_logfile")
    truth = [
        expected(s, fmt)
        for s in STATEMENTS
        if in_the_log(s) and switches.search(s["sql"]) and not s["sql"].startswith("GRANT")
    ]
    got = [e for e in answer(fmt, flag="anti_forensic") if e.command == "Query"]
    assert seen(got) == truth


def test_sessions_accounts_and_applications(scene, fmt: str) -> None:
    for key, s in TRUTH["sessions"].items():
        connect = Event.objects.get(
            server=server_of(fmt), connection_id=session_number(key), command="Connect"
        )
        assert (connect.user, connect.host, connect.database, connect.attribution) == (
            s["user"],
            s["host"],
            s["database"],
            "record",
        )
        session = Session.objects.get(pk=connect.session_id)
        assert (session.user, session.program) == (s["user"], s["application"])
        statements = Event.objects.filter(session_id=connect.session_id, command="Query")
        assert {e.user for e in statements} <= {s["user"]}
    (refused,) = TRUTH["refused_logins"]
    denied = Event.objects.get(server=server_of(fmt), command="Connect", status="denied")
    assert denied.user == refused["user"] and "failed" in denied.flags


def test_no_password_is_stored_in_clear(scene, fmt: str) -> None:
    events = Event.objects.filter(server=server_of(fmt))
    for secret in TRUTH["secrets"]:
        core = secret.split(",")[0]
        assert not events.filter(sql__contains=core).exists(), secret
        assert not ParseProblem.objects.filter(excerpt__contains=core.encode()).exists()
    bob = [s for s in STATEMENTS if s["sql"].startswith("ALTER ROLE alice PASSWORD")]
    got = answer(fmt, user="bob", statement_type="ALTER ROLE")
    assert len(got) == len(bob) == 1 and {"secret_masked", "failed"} <= set(got[0].flags)


# -- a followed source through the scene's log rotation ----------------------------------------


def stored(server: str) -> Counter[tuple[Any, ...]]:
    rows = Event.objects.filter(server=server).values_list(
        "occurred_at",
        "connection_id",
        "command",
        "user",
        "sql",
        "statement_type",
        "destructive",
        "tables",
        "flags",
    )
    return Counter((*r[:7], tuple(r[7]), tuple(sorted(r[8]))) for r in rows)


@pytest.mark.parametrize(
    ("cuts", "batch", "busy"), [(3, 10_000, False), (7, 5, False), (5, 1, True), (-2, 10_000, False)]
)
def test_a_followed_source_through_the_rotation_stores_each_event_once(
    tmp_path: Path, settings, fmt: str, cuts: int, batch: int, busy: bool
) -> None:
    """The server's files appear as the server writes them: the first in pieces cut at line ends
    (inside a statement's lines and a csvlog record's quoted newlines too), polled between
    pieces, committed in batches of `batch` events; then the rotation's new file. `busy`: with
    another session's login between a statement's two pgAudit entries. A negative `cuts`: the
    first piece is the server's start line alone (a poll that ends right after it, before the
    server has written anything more), then as many pieces as it says. Exactly what a straight
    ingest of both stores."""
    settings.INGEST_SETTLE_SECONDS = 3600  # never quiet while it is written
    settings.INGEST_BATCH_SIZE = batch
    first, second = files(fmt)
    if busy:
        first = tmp_path / ("busy" + first.suffix)
        first.write_bytes(interleaved(first.suffix))
    logdir = tmp_path / "log"
    logdir.mkdir()
    source = Source.objects.create(
        name=f"followed {fmt}",
        kind=Source.Kind.FILE,
        path=str(logdir / ("postgresql-*" + first.suffix)),
        server="followed",
        format="auto",
    )
    data = first.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    if cuts < 0:  # (the scene's first line is the server's start line)
        cuts = -cuts
        marks = [ends[0]] + [ends[len(ends) * n // cuts] for n in range(1, cuts)] + [len(data)]
    else:
        marks = [ends[len(ends) * n // cuts] for n in range(1, cuts)] + [len(data)]
    target = logdir / ("postgresql-20261125-012332" + first.suffix)
    written = 0
    for mark in marks:
        with target.open("ab") as f:
            f.write(data[written:mark])
        written = mark
        run = ingest_source(source.pk)
        assert run is None or run.status == IngestRun.Status.DONE
    shutil.copyfile(second, logdir / ("postgresql-20261125-012334" + second.suffix))
    ingest_source(source.pk)
    settings.INGEST_SETTLE_SECONDS = 0  # the server is quiet now: the last record is complete
    ingest_source(source.pk)
    ingest_source(source.pk)
    reference = source_for_path(first, server="reference", fmt="auto", tz="UTC")
    # One tracker and gap finder for both files, as `manage.py ingest` has.
    tracker, gaps = SessionTracker("reference"), GapFinder()
    for path in (first, second):
        ingest_file(path, source=reference, tracker=tracker, gap_finder=gaps)
    mine, theirs = stored("followed"), stored("reference")
    assert sum(theirs.values()) > 60
    assert mine == theirs
    assert not ParseProblem.objects.filter(source_file__source=source).exists()
