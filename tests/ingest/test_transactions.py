"""`rolled_back`: data-changing statements of a transaction that ends in ROLLBACK, or that is open
when the session disconnects or changes user; COMMIT, DDL and turning autocommit on keep them."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from ingest.events import FlagCorrection
from ingest.models import Event
from ingest.normalize import SessionTracker, classify_events
from ingest.parsers import general_log


def log(*statements: str, conn: int = 5) -> bytes:
    lines = [f"2026-01-05T09:00:00.000000Z\t{conn:>6} Connect\tbob@db1 on shop using TCP/IP\n"]
    for n, sql in enumerate(statements, 1):
        command, _, argument = sql.partition(":") if sql in ("Quit:", "Change user:") else ("Query", "", sql)
        lines.append(f"2026-01-05T09:00:{n:02d}.000000Z\t{conn:>6} {command}\t{argument}\n")
    return "".join(lines).encode()


def rolled_back(data: bytes) -> list[str]:
    """The SQL of the events the corrections name, in the order they were named."""
    events, names = {}, []
    for item in classify_events(
        SessionTracker("s").process(general_log.parse(data.splitlines(keepends=True)))
    ):
        if isinstance(item, FlagCorrection):
            names += [events[h] for h, _ in item.keys]
        elif hasattr(item, "record_hash"):
            events[item.record_hash()] = item.sql
    return names


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        (
            ["BEGIN", "DELETE FROM orders", "UPDATE t SET a = 1", "ROLLBACK"],
            ["DELETE FROM orders", "UPDATE t SET a = 1"],
        ),
        (["START TRANSACTION", "DELETE FROM orders", "COMMIT", "ROLLBACK"], []),
        (["DELETE FROM orders", "ROLLBACK"], []),  # autocommit: committed by itself
        (["SET autocommit = 0", "DELETE FROM orders", "ROLLBACK"], ["DELETE FROM orders"]),
        (["SET autocommit=0", "DELETE FROM orders", "CREATE TABLE x (a INT)", "ROLLBACK"], []),  # DDL commits
        (["SET autocommit=0", "DELETE FROM orders", "SET autocommit=1", "ROLLBACK"], []),
        (["set @@session.autocommit=OFF", "DELETE FROM orders", "Quit:"], ["DELETE FROM orders"]),
        (["BEGIN", "DELETE FROM orders", "Change user:"], ["DELETE FROM orders"]),
        (["BEGIN", "DELETE FROM orders", "BEGIN", "ROLLBACK"], []),  # the second BEGIN commits the first
        (["BEGIN", "SAVEPOINT a", "DELETE FROM orders", "ROLLBACK TO SAVEPOINT a", "COMMIT"], []),
        (["BEGIN", "SELECT * FROM deleted_items", "ROLLBACK"], []),  # nothing changed data
        (["BEGIN", "TRUNCATE orders", "ROLLBACK"], []),  # TRUNCATE commits implicitly
    ],
)
def test_which_statements_were_rolled_back(statements: list[str], expected: list[str]) -> None:
    assert rolled_back(log(*statements)) == expected


def test_a_transaction_open_at_the_end_of_a_file_goes_on_into_the_next() -> None:
    tracker = SessionTracker("s")
    first = log("BEGIN", "DELETE FROM orders")
    list(classify_events(tracker.process(general_log.parse(first.splitlines(keepends=True)))))
    state = tracker.to_state()
    tracker = SessionTracker.from_state("s", tracker.tz, state)  # through a checkpoint
    second = b"2026-01-05T09:01:00.000000Z\t     5 Query\tROLLBACK\n"
    items = list(classify_events(tracker.process(general_log.parse(second.splitlines(keepends=True)))))
    [correction] = [i for i in items if isinstance(i, FlagCorrection)]
    assert correction.flag == "rolled_back" and len(correction.keys) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("parallel", [True, False], ids=["two processes", "one process"])
def test_the_flag_reaches_events_stored_in_an_earlier_batch(tmp_path, settings, api_client, parallel) -> None:
    settings.INGEST_BATCH_SIZE = 2  # the DELETE is stored batches before the ROLLBACK is read
    settings.INGEST_PARALLEL = parallel
    path = tmp_path / "general.log"
    path.write_bytes(log("BEGIN", "DELETE FROM orders WHERE id = 1", "SELECT 1", "SELECT 2", "ROLLBACK",
                         "DELETE FROM orders WHERE id = 2"))  # fmt: skip
    call_command("ingest", str(path), "--server", "s", stdout=io.StringIO())
    rows = api_client.get("/api/v1/events/", {"destructive": "true"}).json()["results"]
    assert [(r["sql"], "rolled_back" in r["flags"]) for r in rows] == [
        ("DELETE FROM orders WHERE id = 2", False),
        ("DELETE FROM orders WHERE id = 1", True),
    ]
    assert [
        r["sql"] for r in api_client.get("/api/v1/events/", {"flag": "rolled_back"}).json()["results"]
    ] == ["DELETE FROM orders WHERE id = 1"]
    call_command("ingest", str(path), "--server", "s", stdout=io.StringIO())  # again: the same
    assert Event.objects.filter(flags__contains=["rolled_back"]).count() == 1
    assert Event.objects.get(sql="DELETE FROM orders WHERE id = 1").flags.count("rolled_back") == 1
