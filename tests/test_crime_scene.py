"""The crime scene: an investigator's questions, asked of every log the real MariaDB wrote of it.

Each log of tests/fixtures/crime_scene/ is ingested by `manage.py ingest` under its own server
label and asked through `filter_events`; every answer must be one truth.json expects, with its
account, time, statement and labels (what is compared, and what each log can tell: "The crime
scene" in docs/architecture.md).
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command

from ingest.models import Event
from ingest.sql.secrets import mask_secrets
from investigations.query.filters import filter_events

from .conftest import FIXTURES

CRIME = FIXTURES / "crime_scene"
TRUTH = json.loads((CRIME / "truth.json").read_text())
ENTRIES: list[dict[str, Any]] = TRUTH["entries"]
MARKS = {name: datetime.fromisoformat(when) for name, when in TRUTH["marks"].items()}

# log -> (files, ingest --format, the truth's name for it, times to the microsecond)
LOGS = {
    "general_log": (TRUTH["files"]["general_log"], "general-log", "general_log", False),
    "table_csv": (TRUTH["files"]["table_csv"], "general-log-csv", "table", True),
    "table_tsv": (TRUTH["files"]["table_tsv"], "general-log-tsv", "table", True),
    "server_audit": (TRUTH["files"]["server_audit"], "mariadb-audit", "server_audit", False),
}
# The flags an investigator reads; others (unparsed, time_approximate...) are not compared.
FLAGS = frozenset(
    {
        "no_where",
        "multi_table",
        "multi_statement",
        "failed",
        "rolled_back",
        "routine",
        "destructive_body",
        "prepared",
        "privilege_change",
        "anti_forensic",
        "unattributed",
    }
)
NOT_RECORDS = ("Table ", "Server start")  # see the module docstring


def server_of(log: str) -> str:
    return f"crime-{log}"


@pytest.fixture(scope="module")
def crime_scene(django_db_setup, django_db_blocker):
    """Every log of the scene ingested once for this module (committed; flushed afterwards)."""
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)
        for log, (files, fmt, _, _) in LOGS.items():
            out = io.StringIO()
            paths = [str(CRIME / f) for f in files]
            call_command("ingest", *paths, "--format", fmt, "--server", server_of(log), "--timezone", "UTC",
                         stdout=out)  # fmt: skip
            assert ", 0 problems," in out.getvalue(), out.getvalue()
        yield
        call_command("flush", interactive=False, verbosity=0)


# -- the truth, as each log shows it --------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What an investigator reads of one event (or should read, from the truth)."""

    user: str | None
    host: str | None
    connection_id: int | None
    command: str
    sql: str
    statement_type: str
    tables: tuple[str, ...]
    destructive: bool
    flags: frozenset[str]


def expected_answer(entry: dict[str, Any], log: str) -> Answer:
    truth_log = LOGS[log][2]
    flags = frozenset(entry["flags"])
    if truth_log != "server_audit" and entry["command"] != "Connect":
        flags -= {"failed"}  # the general log (file or table) does not say how a statement ended
    # The truth has each statement as sent; AuditWeb stores it with its passwords masked.
    sql = "" if truth_log == "server_audit" and entry["command"] == "Connect" else mask_secrets(entry["sql"])
    return Answer(
        entry["user"], entry["host"], entry["connection_id"], entry["command"], sql, entry["statement_type"],
        tuple(sorted(entry["tables"])), entry["destructive"], flags,
    )  # fmt: skip


def answer_of(event: Event) -> Answer:
    return Answer(
        event.user, event.host, event.connection_id, event.command, event.sql, event.statement_type,
        tuple(sorted(event.tables)), event.destructive, frozenset(event.flags) & FLAGS,
    )  # fmt: skip


def in_window(event: Event, entry: dict[str, Any], log: str) -> bool:
    """Whether the event's time is within the moments its statement was sent and answered."""
    sent, done = datetime.fromisoformat(entry["sent_at"]), datetime.fromisoformat(entry["done_at"])
    if LOGS[log][3]:
        slack = timedelta(milliseconds=5)
        return sent - slack <= event.occurred_at <= done + slack
    return sent.replace(microsecond=0) <= event.occurred_at <= done


def truth_of_events(log: str) -> dict[int, dict[str, Any]]:
    """Event id -> the truth entry it is, matched connection by connection in log order.

    The regenerate script checked that each log holds exactly the truth's records for it, in
    this order. The connection ids of the two boots do not overlap in the scene (the script
    saw to it), so the id alone says which connection a record is of."""
    truth_log = LOGS[log][2]
    expected: dict[int | None, list[dict[str, Any]]] = defaultdict(list)
    for e in ENTRIES:
        if truth_log in e["logged_by"]:
            expected[e["connection_id"]].append(e)
    found: dict[int | None, list[Event]] = defaultdict(list)
    for event in Event.objects.filter(server=server_of(log)).order_by("id"):
        if not event.command.startswith(NOT_RECORDS):
            found[event.connection_id].append(event)
    assert set(found) == set(expected), f"{log}: the connections differ from the truth's"
    pairs: dict[int, dict[str, Any]] = {}
    for conn, entries in expected.items():
        got = found[conn]
        assert len(got) == len(entries), (log, conn, [e.sql for e in got], [e["sql"] for e in entries])
        pairs.update({event.id: entry for event, entry in zip(got, entries, strict=True)})
    return pairs


# -- the questions ----------------------------------------------------------------------------


def second(mark: str) -> str:
    """A mark as an investigator types it: to the second (marks are just after a whole second)."""
    return MARKS[mark].replace(microsecond=0).isoformat()


def sent_between(entry: dict[str, Any], since: str, until: str | None = None) -> bool:
    sent = datetime.fromisoformat(entry["sent_at"])
    return datetime.fromisoformat(since) <= sent and (until is None or sent < datetime.fromisoformat(until))


def on_orders(entry: dict[str, Any]) -> bool:
    """shop.orders, and after its RENAME what happened to it as shop.orders_old."""
    renamed = next(e["sent_at"] for e in ENTRIES if e["statement_type"] == "RENAME TABLE")
    later = "shop.orders_old" in entry["tables"] and entry["sent_at"] >= renamed
    return "shop.orders" in entry["tables"] or later


@dataclass(frozen=True)
class Question:
    ask: str
    params: dict[str, Any]
    expects: Any  # truth entry -> bool


QUESTIONS = [
    Question(
        "destructive statements on shop.orders between alice and bob's start and the binary protocol",
        {
            "table": "shop.orders",
            "destructive": "true",
            "since": second("alice_and_bob"),
            "until": second("binary_protocol"),
        },
        lambda e: (
            e["destructive"]
            and on_orders(e)
            and sent_between(e, second("alice_and_bob"), second("binary_protocol"))
        ),
    ),
    Question(
        "destructive statements on shop.orders after the restart (a CALL, RENAME, the DROP of its new name)",
        {"table": "shop.orders", "destructive": "true", "since": second("call")},
        lambda e: e["destructive"] and on_orders(e) and sent_between(e, second("call")),
    ),
    Question("everything alice did", {"user": "alice"}, lambda e: e["user"] == "alice"),
    Question("everything mallory did", {"user": "mallory"}, lambda e: e["user"] == "mallory"),
    Question(
        "everything from the socket (localhost)", {"host": "localhost"}, lambda e: e["host"] == "localhost"
    ),
    Question("every destructive statement", {"destructive": "true"}, lambda e: e["destructive"]),
    Question("anti-forensic events", {"flag": "anti_forensic"}, lambda e: "anti_forensic" in e["flags"]),
    Question("privilege changes", {"flag": "privilege_change"}, lambda e: "privilege_change" in e["flags"]),
    Question("DELETE or UPDATE without a WHERE", {"flag": "no_where"}, lambda e: "no_where" in e["flags"]),
    Question("what was rolled back", {"flag": "rolled_back"}, lambda e: "rolled_back" in e["flags"]),
    Question("prepared statements", {"flag": "prepared"}, lambda e: "prepared" in e["flags"]),
    Question("multi-table statements", {"flag": "multi_table"}, lambda e: "multi_table" in e["flags"]),
    Question("routines", {"flag": "routine"}, lambda e: "routine" in e["flags"]),
    Question("failed statements and logins", {"flag": "failed"}, lambda e: "failed" in e["flags"]),
    Question(
        "what was dropped",
        {"statement_type": ["DROP TABLE", "DROP VIEW", "DROP DATABASE"]},
        lambda e: e["statement_type"] in ("DROP TABLE", "DROP VIEW", "DROP DATABASE"),
    ),
]


@dataclass
class Score:
    right: int = 0
    answers: int = 0
    expected: int = 0

    def add(self, other: Score) -> None:
        self.right += other.right
        self.answers += other.answers
        self.expected += other.expected

    @property
    def precision(self) -> float:
        return self.right / self.answers if self.answers else 1.0

    @property
    def recall(self) -> float:
        return self.right / self.expected if self.expected else 1.0


def ask(question: Question, log: str, pairs: dict[int, dict[str, Any]]) -> tuple[Score, list[str]]:
    """Ask through the query layer; score the answers against the truth; say what is wrong."""
    params = {**question.params, "server": server_of(log)}
    found = filter_events(params)
    assert found.is_valid(), found.errors
    events = [e for e in found.qs if not e.command.startswith(NOT_RECORDS)]
    expected = {
        e["seq"]: expected_answer(e, log)
        for e in ENTRIES
        if LOGS[log][2] in e["logged_by"] and question.expects(expected_view(e, log))
    }
    score, wrong = Score(answers=len(events), expected=len(expected)), []
    for event in events:
        entry = pairs.get(event.id)
        if entry is None or entry["seq"] not in expected:
            wrong.append(f"not expected: {answer_of(event)}")
        elif answer_of(event) != expected[entry["seq"]]:
            wrong.append(f"wrong: {answer_of(event)} != {expected[entry['seq']]}")
        elif not in_window(event, entry, log):
            wrong.append(f"wrong time: {event.occurred_at} for {entry['sent_at']}..{entry['done_at']}")
        else:
            score.right += 1
    answered = {pairs[e.id]["seq"] for e in events if e.id in pairs}
    wrong += [f"missing: {expected[seq]}" for seq in sorted(set(expected) - answered)]
    return score, wrong


def expected_view(entry: dict[str, Any], log: str) -> dict[str, Any]:
    """The entry with the flags this log can show (questions read the labels through it)."""
    return {**entry, "flags": sorted(expected_answer(entry, log).flags)}


# -- the tests --------------------------------------------------------------------------------

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("log", LOGS)
@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.ask[:60])
def test_the_investigator_gets_exactly_the_expected_answers(
    crime_scene, log: str, question: Question
) -> None:
    score, wrong = ask(question, log, truth_of_events(log))
    assert wrong == []
    assert score.right == score.expected


def test_precision_and_recall_are_100_percent_on_every_log(crime_scene) -> None:
    lines = [f"{'log':<14} {'answers':>8} {'expected':>9} {'right':>6} {'precision':>10} {'recall':>7}"]
    total = Score()
    for log in LOGS:
        pairs = truth_of_events(log)
        per_log = Score()
        for question in QUESTIONS:
            per_log.add(ask(question, log, pairs)[0])
        total.add(per_log)
        lines.append(
            f"{log:<14} {per_log.answers:>8} {per_log.expected:>9} {per_log.right:>6}"
            f" {per_log.precision:>10.1%} {per_log.recall:>7.1%}"
        )
    lines.append(
        f"{'all':<14} {total.answers:>8} {total.expected:>9} {total.right:>6}"
        f" {total.precision:>10.1%} {total.recall:>7.1%}"
    )
    print(f"\ncrime scene: {len(QUESTIONS)} questions on each log\n" + "\n".join(lines))
    assert total.expected > 300  # the questions do ask for something
    assert (total.precision, total.recall) == (1.0, 1.0)


def test_the_truth_covers_every_record_of_every_log(crime_scene) -> None:
    for log in LOGS:
        pairs = truth_of_events(log)
        records = Event.objects.filter(server=server_of(log)).exclude(command__startswith="Table ")
        records = records.exclude(command="Server start")
        assert set(records.values_list("id", flat=True)) == set(pairs), log
        for event_id, entry in pairs.items():
            assert answer_of(Event.objects.get(id=event_id)) == expected_answer(entry, log), (
                log,
                entry["seq"],
            )


def test_the_general_log_shows_the_restart_and_the_others_show_ids_starting_over(crime_scene) -> None:
    for log in LOGS:
        boots = Event.objects.filter(server=server_of(log)).values_list("session__boot", flat=True)
        assert len(set(boots)) == 2, log
    banners = Event.objects.filter(server=server_of("general_log"), command="Server start")
    assert banners.count() == 2


# -- the logs agree ---------------------------------------------------------------------------

# Flags a log cannot tell, so questions about them are not answered alike.
CANNOT_TELL = {"general_log": {"failed"}, "table": {"failed"}}
PAIRS = [
    ("general_log", "table_csv"),
    ("table_csv", "table_tsv"),
    ("general_log", "server_audit"),
    ("table_tsv", "server_audit"),
]


def told(question: Question, log: str, other: str) -> set[tuple[Any, ...]]:
    """What `log` answers to `question` about the records it shares with `other` (the same
    statement or connection record written by both), cut to what both can tell: times to the
    second (the file logs print no fractions), no `failed` beside a general log (it does not
    say how a statement ended), no Connect text beside server_audit (it writes none)."""
    shared = {e["seq"] for e in ENTRIES if {LOGS[log][2], LOGS[other][2]} <= set(e["logged_by"])}
    pairs = truth_of_events(log)
    found = filter_events({**question.params, "server": server_of(log)})
    assert found.is_valid(), found.errors
    general = {"general_log", "table"} & {LOGS[log][2], LOGS[other][2]}
    audit = "server_audit" in (LOGS[log][2], LOGS[other][2])
    out = set()
    for event in found.qs:
        entry = pairs.get(event.id)
        if entry is None or entry["seq"] not in shared:
            continue
        a = answer_of(event)
        flags = a.flags - {"failed"} if general else a.flags
        sql = "" if audit and a.command == "Connect" else a.sql
        when = event.occurred_at.replace(microsecond=0)
        out.add((entry["seq"], a.user, a.host, a.connection_id, a.command, sql, a.statement_type, a.tables,
                 a.destructive, flags, when))  # fmt: skip
    return out


@pytest.mark.parametrize(("log", "other"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.ask[:60])
def test_two_logs_of_the_scene_give_the_same_answers_about_what_both_recorded(
    crime_scene, log: str, other: str, question: Question
) -> None:
    # Independent of the truth's labels: the two answers are compared with each other.
    blind = [x for x in (log, other) if question.params.get("flag") in CANNOT_TELL.get(LOGS[x][2], ())]
    if blind:
        # One log cannot tell what is asked (a general log and `failed`): what it answers, the
        # other answers too (here: nothing, as its refused logins are records of its own).
        seeing = other if blind[0] == log else log
        assert told(question, blind[0], seeing) <= told(question, seeing, blind[0])
    else:
        answers = told(question, log, other)
        assert answers == told(question, other, log)
        assert answers, "the two logs share records that answer this"


def test_every_log_names_the_same_people_for_what_happened_to_shop_orders(crime_scene) -> None:
    """Who, from where, in which connection and which second, whatever log one reads: the general log's
    Execute record and server_audit's copy of the DELETE it ran are the same deletion, a CALL and the
    statements server_audit says it ran are the same call."""
    people = {}
    for log in LOGS:
        found = filter_events({"table": "shop.orders", "destructive": "true", "server": server_of(log)}).qs
        people[log] = {(e.user, e.host, e.connection_id, e.occurred_at.replace(microsecond=0)) for e in found}
    assert people["general_log"] == people["table_csv"] == people["table_tsv"] == people["server_audit"]
    assert {(user, conn) for user, _, conn, _ in people["general_log"]} == {
        ("alice", 405), ("bob", 406), ("carol", 407), ("bob", 408), ("alice", 409), ("bob", 8), ("mallory", 9)
    }  # fmt: skip


def test_who_destroyed_shop_orders_after_the_restart_read_from_the_general_log(crime_scene) -> None:
    found = filter_events(
        {
            "table": "shop.orders",
            "destructive": "true",
            "since": "2026-11-23T12:48:39Z",
            "server": "crime-general_log",
        }
    ).qs
    assert [
        (e.user, e.host, e.connection_id, e.occurred_at.isoformat(), e.sql, sorted(set(e.flags) & FLAGS))
        for e in found.order_by("occurred_at", "id")
    ] == [
        ("bob", "127.0.0.1", 8, "2026-11-23T12:48:39+00:00", "CALL purge_cancelled()", ["routine"]),
        ("mallory", "127.0.0.1", 9, "2026-11-23T12:48:40+00:00", "RENAME TABLE orders TO orders_old", []),
        ("mallory", "127.0.0.1", 9, "2026-11-23T12:48:40+00:00", "DROP TABLE orders_old", []),
    ]
    drop = found.get(sql="DROP TABLE orders_old")
    assert drop.tables == ["shop.orders_old"]  # found under shop.orders: the table's later name
    assert (
        drop.session.boot
        != Event.objects.get(server="crime-general_log", connection_id=405, command="Connect").session.boot
    )


def test_the_gaps_each_log_shows(crime_scene) -> None:
    """Where recording stopped, as each log shows it, in order, with whether it is still open."""
    from ingest.models import Gap

    def gaps(log: str) -> list[tuple[str, str, bool]]:
        found = Gap.objects.filter(server=server_of(log)).order_by("started_at", "id")
        return [(g.reason, g.detail, g.ended_at is None) for g in found]

    def off(sql: str, *, still: bool = False) -> tuple[str, str, bool]:
        return ("logging_off", f"logging switched off by {sql!r}", still)

    # The general log cannot tell that mallory's first attempts were refused: each opens a gap
    # that her next statement closes.
    refused = [
        off("SET GLOBAL general_log = OFF"),
        off("SET GLOBAL log_output = 'NONE'"),
        off("UNINSTALL SONAME 'server_audit'"),
    ]
    last = [off("SET GLOBAL server_audit_logging = OFF"), off("SET GLOBAL general_log = OFF", still=True)]
    # The general log's banner: a restart, as the ids after it show (a banner is written at a
    # reopening of the log too).
    banner = (
        "restart",
        "the server restarted: connection 7 logged in after it (line 96) with ids started over (highest"
        " before it: 414). Before it, connection 414 asked the server to shut down at line 92",
        False,
    )
    restart = ("restart", "the server restarted: connection ids started over", False)
    assert gaps("general_log") == [*refused, banner, *last]
    assert gaps("table_csv") == gaps("table_tsv") == [*refused, restart, *last]
    # server_audit knows the attempts failed. It sees the restart only at the next login (the
    # harness's switching on, just before, is logged without its connection's CONNECT), and
    # its last record is mallory switching it off.
    assert gaps("server_audit") == [restart, off("SET GLOBAL server_audit_logging = OFF", still=True)]
