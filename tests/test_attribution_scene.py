"""The attribution scene (issue 17): who ran each destructive statement, and how AuditWeb knows.

tests/fixtures/attribution_scene/ holds what a private MariaDB 10.11 wrote of one story (see
regenerate.py there): the general log as logrotate left it (`general.log.1`, then
`general.log`), the mysql.general_log table's CSV file, server_audit (`.1`, then the file
of the later boots) and the binary logs; truth.json holds every record each log has, with
the account that really ran it, its connection, boot, and the attribution AuditWeb should
report from that log (`record`, `connect`, `connect_earlier_file`, `unattributed`) and the
record's line in its file.

The logs are ingested as a user would (`manage.py ingest`, rotated files oldest first), each
under its own server label and all together under one more; the questions go through
`investigations.query.filters.filter_events` (the filter of the pages, the API and the reports) and
the sessions API. Every destructive statement must come back with its true user, host,
connection id and attribution; what a log cannot know stays unattributed; no event of any
log names a wrong account.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from ingest.models import Event, Session
from investigations.query.filters import filter_events

from .conftest import FIXTURES

SCENE = FIXTURES / "attribution_scene"
TRUTH_FILE = SCENE / "truth.json"
TRUTH: dict[str, Any] = json.loads(TRUTH_FILE.read_text()) if TRUTH_FILE.exists() else {"files": {}}
ENTRIES: list[dict[str, Any]] = TRUTH.get("entries", [])
MISSING = [name for names in TRUTH["files"].values() for name in names if not (SCENE / name).exists()] or (
    [] if TRUTH_FILE.exists() else ["truth.json"]
)

pytestmark = [
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"the attribution scene's files are absent ({', '.join(MISSING)}): run "
        "tests/fixtures/attribution_scene/regenerate.py",
    ),
    pytest.mark.django_db,
]

# log (the truth's name) -> (its files in order, ingest --format, server label)
LOGS = {
    "general_log": (TRUTH["files"].get("general_log", []), "general-log", "attr-general"),
    "table": (TRUTH["files"].get("table", []), "general-log-csv", "attr-table"),
    "server_audit": (TRUTH["files"].get("server_audit", []), "mariadb-audit", "attr-audit"),
}
TOGETHER = "attr-all"  # every log of the scene under one server label
NOT_RECORDS = ("Table ", "Server start")  # server_audit's TABLE records, the general log's banners


@pytest.fixture(scope="module")
def scene(django_db_setup, django_db_blocker):
    """Every log ingested once for this module (committed; flushed afterwards)."""
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)
        for files, fmt, server in LOGS.values():
            ingest([SCENE / f for f in files], "--format", fmt, "--server", server)
        together = [SCENE / f for files, _, _ in LOGS.values() for f in files]
        ingest(together, "--server", TOGETHER)  # --format auto: each file is recognised
        yield
        call_command("flush", interactive=False, verbosity=0)


def ingest(paths: list[Path], *options: str) -> None:
    out = io.StringIO()
    call_command("ingest", *map(str, paths), *options, "--timezone", "UTC", stdout=out)
    assert ", 0 problems," in out.getvalue(), out.getvalue()


# -- the truth, and the events it is about -------------------------------------------------


def logged(log: str, *, destructive: bool | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in ENTRIES
        if log in e["logged_by"] and (destructive is None or e["destructive"] == destructive)
    ]


def entry_id(entry: dict[str, Any]) -> str:
    return f"{entry['seq']}-{entry['user']}-{entry['connection_id']}-{entry['sql'][:40]}"


def position(event: Event) -> tuple[str, int]:
    return (Path(event.source_file.path).name, event.line)


def truth_at(log: str) -> dict[tuple[str, int], dict[str, Any]]:
    """(file, line) -> the truth entry of the record there (the regenerate script checked it)."""
    return {(e["logged_by"][log], e["line"][log]): e for e in logged(log)}


def ask(params: dict[str, Any]) -> list[Event]:
    """The investigator's question, through the one query layer."""
    found = filter_events(params)
    assert found.is_valid(), found.errors
    return [e for e in found.qs.select_related("source_file") if not e.command.startswith(NOT_RECORDS)]


def account(entry: dict[str, Any], log: str) -> tuple[str | None, str | None]:
    """Who the event of `entry` must name in `log`: nobody where the log cannot know."""
    if entry["attribution"][log] == "unattributed":
        return (None, None)
    return (entry["user"], entry["host"])


def seen(event: Event) -> tuple[Any, ...]:
    return (event.user, event.host, event.connection_id, event.attribution)


def expected(entry: dict[str, Any], log: str) -> tuple[Any, ...]:
    return (*account(entry, log), entry["connection_id"], entry["attribution"][log])


# -- every destructive statement, from each log ------------------------------------------------

DESTRUCTIVE = [(log, e) for log in LOGS for e in logged(log, destructive=True)]


@pytest.mark.parametrize(
    ("log", "entry"), DESTRUCTIVE, ids=[f"{log}-{entry_id(e)}" for log, e in DESTRUCTIVE]
)
def test_each_destructive_statement_names_who_ran_it_and_how_that_is_known(
    scene, log: str, entry: dict[str, Any]
) -> None:
    server = LOGS[log][2]
    found = [e for e in ask({"server": server, "destructive": "true"}) if position(e) in truth_at(log)]
    at = {position(e): e for e in found}
    where = (entry["logged_by"][log], entry["line"][log])
    assert where in at, f"the investigator does not find {entry['sql']!r} among the destructive statements"
    assert seen(at[where]) == expected(entry, log), entry["note"]


@pytest.mark.parametrize("log", LOGS)
def test_no_event_of_a_log_names_a_wrong_account(scene, log: str) -> None:
    """Every record, destructive or not: its true account, or nobody where the log cannot know."""
    truth = truth_at(log)
    events = ask({"server": LOGS[log][2]})
    assert {position(e) for e in events} == set(truth), "the events are not the records the truth lists"
    wrong = [
        (truth[position(e)]["seq"], e.sql, (e.user, e.host), account(truth[position(e)], log))
        for e in events
        if (e.user, e.host) != account(truth[position(e)], log)
    ]
    assert wrong == []


@pytest.mark.parametrize("log", LOGS)
def test_each_log_says_how_it_knows_every_account(scene, log: str) -> None:
    truth = truth_at(log)
    wrong = [
        (truth[position(e)]["seq"], e.command, e.sql, e.attribution, truth[position(e)]["attribution"][log])
        for e in ask({"server": LOGS[log][2]})
        if e.attribution != truth[position(e)]["attribution"][log]
    ]
    assert wrong == []


def test_all_logs_read_together_name_no_wrong_account(scene) -> None:
    """One server label for everything: the other logs may tell more than one log alone (an
    account the general log could not know), never something else."""
    wrong = []
    for log in LOGS:
        truth = truth_at(log)
        for e in ask({"server": TOGETHER}):
            entry = truth.get(position(e))
            if entry is None:
                continue  # another log's record
            if e.user is None and entry["attribution"][log] == "unattributed":
                continue
            if (e.user, e.host, e.connection_id) != (entry["user"], entry["host"], entry["connection_id"]):
                wrong.append((log, entry["seq"], e.sql, (e.user, e.host), (entry["user"], entry["host"])))
            elif not e.attribution or (e.attribution == "unattributed") != (e.user is None):
                wrong.append((log, entry["seq"], e.sql, "attribution", e.attribution))
    assert wrong == []


# -- the questions an investigator asks --------------------------------------------------------


def destroyed_by(log: str, user: str) -> list[str]:
    return sorted(e.sql for e in ask({"server": LOGS[log][2], "user": user, "destructive": "true"}))


def truly_destroyed_by(log: str, user: str) -> list[str]:
    return sorted(
        e["sql"] for e in logged(log, destructive=True) if e["user"] == user and account(e, log)[0] == user
    )


@pytest.mark.parametrize("log", LOGS)
@pytest.mark.parametrize("user", ["mallory", "erin", "alice", "bob", "carol"])
def test_what_each_account_destroyed(scene, log: str, user: str) -> None:
    assert destroyed_by(log, user) == truly_destroyed_by(log, user)


def test_mallory_is_named_for_what_she_did_after_switching_the_general_log_back_on(scene) -> None:
    """Her Connect is above the banner that `SET GLOBAL general_log = ON` wrote; ids went on
    rising after it (bob's new connection): a reopen, not a restart."""
    found = ask({"server": "attr-general", "user": "mallory", "destructive": "true"})
    assert [(e.connection_id, e.sql, e.attribution) for e in sorted(found, key=lambda e: e.id)] == [
        (5, "DELETE FROM orders WHERE id = 1", "connect"),
        (5, "DELETE FROM orders WHERE id = 3", "connect"),
        (5, "DELETE FROM payments WHERE order_id = 3", "connect"),
        (5, "UPDATE orders SET total = 0 WHERE id = 6", "connect"),
        (5, "DELETE FROM customers WHERE id = 3", "connect"),
        (5, "DELETE FROM orders WHERE id = 9", "connect_earlier_file"),
    ]


def test_what_she_did_while_the_general_log_was_off_is_only_in_server_audit(scene) -> None:
    hidden = {"DELETE FROM orders WHERE id = 2", "UPDATE customers SET email = NULL WHERE id = 1"}
    assert hidden <= set(destroyed_by("server_audit", "mallory"))
    assert not hidden & set(destroyed_by("general_log", "mallory"))
    assert not hidden & set(destroyed_by("table", "mallory"))


def test_a_connection_made_while_the_general_log_was_off_is_unattributed_there(scene) -> None:
    (delete,) = ask({"server": "attr-general", "q": "DELETE FROM orders WHERE id = 5"})
    assert seen(delete) == (None, None, 6, "unattributed")
    (row,) = ask({"server": "attr-table", "q": "DELETE FROM orders WHERE id = 5"})
    assert seen(row) == ("erin", "127.0.0.1", 6, "record")


def test_a_connection_across_the_rotation_keeps_its_account_in_the_newer_file(scene) -> None:
    (delete,) = ask({"server": "attr-general", "q": "DELETE FROM orders WHERE id = 7"})
    assert Path(delete.source_file.path).name == TRUTH["files"]["general_log"][1]
    assert seen(delete) == ("bob", "127.0.0.1", 7, "connect_earlier_file")
    assert delete.session.connection_id == 7 and delete.session.user == "bob"


def test_the_change_of_user_splits_the_connection_into_two_sessions(scene, api_client) -> None:
    """alice's UPDATE, then bob's DELETE on the same connection 9: `?user=` finds each run."""
    for server in ("attr-general", "attr-table", "attr-audit"):
        runs = {}
        for user in ("alice", "bob"):
            answer = api_client.get("/api/v1/sessions/", {"user": user, "server": server, "connection_id": 9})
            assert answer.status_code == 200
            runs[user] = [s["id"] for s in answer.json()["results"]]
            assert len(runs[user]) == 1, (server, user, answer.json()["results"])
        alice, bob = (Session.objects.get(id=runs[u][0]) for u in ("alice", "bob"))
        assert bob.previous_id == alice.id, server
        update = Event.objects.get(server=server, sql="UPDATE orders SET status = 'void' WHERE id = 10")
        delete = Event.objects.get(server=server, sql="DELETE FROM old_orders WHERE id = 1")
        assert (update.session_id, update.user) == (alice.id, "alice"), server
        assert (delete.session_id, delete.user) == (bob.id, "bob"), server


def test_server_audit_names_bob_after_the_change_of_user_and_his_database(scene) -> None:
    """Its QUERY records after CHANGEUSER name alice and the database `mysql`: both stale."""
    for sql in ("DELETE FROM old_orders WHERE id = 1", "SELECT 6 * 7"):
        (event,) = ask({"server": "attr-audit", "q": sql})
        assert (event.user, event.database, event.attribution) == ("bob", "archive", "connect"), sql
    (delete,) = ask({"server": "attr-audit", "q": "DELETE FROM old_orders WHERE id = 1"})
    assert delete.tables == ["archive.old_orders"]


def test_a_refused_change_of_user_changes_nobody(scene) -> None:
    """The general log writes `Change user alice...` and then `Access denied`; the connection
    goes on as bob."""
    for log in LOGS:
        (delete,) = ask({"server": LOGS[log][2], "q": "DELETE FROM old_orders WHERE id = 2"})
        assert (delete.user, delete.connection_id) == ("bob", 9), log


def test_refused_logins_own_no_statement(scene) -> None:
    refused = [e for e in ENTRIES if e["user"] == "mallory" and e["connection_id"] == 10]
    assert refused and all(e["command"] in ("Connect", "Quit") for e in refused)
    for log in LOGS:
        on_it = ask({"server": LOGS[log][2], "connection_id": 10})
        assert {e.command for e in on_it} <= {"Connect", "Quit"}, log
        assert not [
            e
            for e in ask({"server": LOGS[log][2], "user": "mallory"})
            if e.connection_id == 10 and e.command not in ("Connect", "Quit")
        ]
        # The refused change of user names alice, who ran nothing on connection 9 after it.
        after = [
            e for e in ask({"server": LOGS[log][2], "user": "alice", "connection_id": 9}) if e.destructive
        ]
        assert [e.sql for e in after] == ["UPDATE orders SET status = 'void' WHERE id = 10"], log


def test_ids_reused_after_a_restart_do_not_inherit_the_account_before_it(scene) -> None:
    for reuse in TRUTH["reused_ids"]:
        for log in LOGS:
            boot_two = [
                e for e in logged(log) if e["boot"] == 2 and e["connection_id"] == reuse["connection_id"]
            ]
            truth = truth_at(log)
            for event in ask({"server": LOGS[log][2], "connection_id": reuse["connection_id"]}):
                entry = truth[position(event)]
                if entry in boot_two:
                    assert event.user == reuse["boot_2"] != reuse["boot_1"], (log, entry["seq"])


def test_after_a_restart_with_the_general_log_off_a_reused_id_is_unknown_not_the_old_owner(scene) -> None:
    """Boot 3: bob connected while the general log was off, on id 4, which boot 2 gave erin
    (still connected at the shutdown); dave switched the log on; alice's Connect on id 6
    (given out before, in boot 2) shows that ids started over."""
    for sql in ("DELETE FROM orders WHERE id = 15", "DELETE FROM orders WHERE id = 18"):
        (general,) = ask({"server": "attr-general", "q": sql})
        assert seen(general) == (None, None, 4, "unattributed"), sql
        for server in ("attr-table", "attr-audit"):
            (event,) = ask({"server": server, "q": sql})
            assert seen(event) == ("bob", "127.0.0.1", 4, "record"), (server, sql)
    assert "DELETE FROM orders WHERE id = 14" in destroyed_by("server_audit", "bob")


def test_the_definer_routine_is_carols_call_and_names_dave_as_definer(scene) -> None:
    for log in LOGS:
        (call,) = ask({"server": LOGS[log][2], "q": "CALL purge_cancelled()"})
        assert (call.user, call.host, call.connection_id, call.definer) == (
            "carol",
            "localhost",
            5,
            "dave@localhost",
        ), log
    # server_audit writes the DELETE the body ran (before the CALL record, with the next query
    # id): it is carol's, run as dave.
    found = ask({"server": "attr-audit", "q": "DELETE FROM shop.orders WHERE status = 'cancelled'"})
    (body,) = [e for e in found if e.statement_type == "DELETE"]  # not the CREATE PROCEDURE
    assert "in_routine" in body.flags
    assert (body.user, body.connection_id, body.definer, body.attribution) == (
        "carol",
        5,
        "dave@localhost",
        "record",
    )


def test_the_last_record_of_every_log_is_stored_and_is_bobs_delete(scene) -> None:
    for log, (files, _, server) in LOGS.items():
        last = (
            Event.objects.filter(server=server, source_file__path=str(SCENE / files[-1]))
            .exclude(command__startswith="Table ")
            .order_by("-line")
            .first()
        )
        assert last is not None, log
        assert last.sql == "DELETE FROM orders WHERE id = 18", log
        assert (last.connection_id, last.destructive) == (4, True), log
