"""The statement dictionary (issue 22): each distinct statement stored once, events pointing to it."""

from __future__ import annotations

import pytest
from django.db import connection

from ingest.models import Event, Statement
from ingest.rows import statement_id, statement_key

pytestmark = pytest.mark.django_db(transaction=True)

LOG = (
    b"2026-11-25T04:00:00.000000Z\t    3 Connect\tapp@10.0.0.9 on shop using TCP/IP\n"
    b"2026-11-25T04:00:01.000000Z\t    3 Query\tDELETE FROM orders WHERE id = 1\n"
    b"2026-11-25T04:00:02.000000Z\t    3 Query\tDELETE FROM orders WHERE id = 1\n"
    b"2026-11-25T04:00:03.000000Z\t    3 Init DB\tbilling\n"
    b"2026-11-25T04:00:04.000000Z\t    3 Query\tDELETE FROM orders WHERE id = 1\n"
    b"2026-11-25T04:00:05.000000Z\t    3 Query\tSELECT 'tab\there', x'00ff' FROM t\n"
)


def statement_of(event: Event) -> Statement:
    return Statement.objects.get(pk=event.statement_id)


def test_the_same_statement_in_the_same_database_is_stored_once(ingest_bytes) -> None:
    ingest_bytes(LOG)
    deletes = list(Event.objects.filter(sql="DELETE FROM orders WHERE id = 1").order_by("id"))
    assert [e.database for e in deletes] == ["shop", "shop", "billing"]
    assert [e.tables for e in deletes] == [["shop.orders"], ["shop.orders"], ["billing.orders"]]
    # One statement for the first two; the third's tables are another database's: another one.
    assert deletes[0].statement_id == deletes[1].statement_id != deletes[2].statement_id
    # Connect, the two DELETEs, Init DB, SELECT: six events, five statements.
    assert Event.objects.count() == 6
    assert Statement.objects.count() == Event.objects.values("statement_id").distinct().count() == 5


@pytest.mark.parametrize(
    "values",
    [
        (None, "SELECT", [], False, "select ?", "SELECT 1"),
        ("shop", "DELETE", ["shop.orders", 'x."y|z'], True, "delete from orders", "DELETE FROM t -- é ✓"),
        ("", "", [], False, "", ""),
        ("a", "b", ["1:x"], False, "2:", "|3:"),
    ],
)
def test_python_and_postgresql_make_the_same_key_and_ids(values: tuple[object, ...]) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT ingest_statement_key(%s, %s, %s::varchar[], %s, %s, %s)", list(values))
        key = bytes(cur.fetchone()[0])
        cur.execute("SELECT ingest_statement_id(%s, 0), ingest_statement_id(%s, 3)", [key, key])
        assert key == statement_key(*values)  # type: ignore[arg-type]
        assert cur.fetchone() == (statement_id(key), statement_id(key, 3))


def test_keys_tell_apart_values_that_would_join_alike() -> None:
    # Each value but the SQL is prefixed by its length: no two lists of values make one text.
    assert statement_key("a", "b", ["c"], False, "d", "e") != statement_key("a", "b", ["c"], False, "d|e", "")
    assert statement_key(None, "", [], False, "", "") != statement_key("-", "", [], False, "", "")
    assert statement_key("s", "", ["a", "b"], False, "", "") != statement_key("s", "", ["a,b"], False, "", "")


def test_a_statement_whose_id_is_taken_takes_the_next_and_its_events_follow(ingest_bytes) -> None:
    ingest_bytes(LOG, server="a")
    first = Event.objects.filter(server="a", command="Query").order_by("id").first()
    assert first is not None
    statement = statement_of(first)
    key = bytes(statement.key)
    assert statement.pk == statement_id(key)
    # Another statement holds that id now (a 64-bit id shared by two keys, made to happen).
    Statement.objects.filter(pk=statement.pk).update(key=b"\x00" * 16)

    ingest_bytes(LOG, server="b", name="b.log")
    again = Event.objects.filter(server="b", command="Query").order_by("id").first()
    assert again is not None
    assert again.statement_id == statement_id(key, 1)
    assert (again.sql, again.tables, again.database) == (first.sql, first.tables, first.database)
    assert bytes(statement_of(again).key) == key

    # Each other event of the log still points to its own statement, with its own values.
    def values(server: str) -> list[tuple[object, ...]]:
        events = Event.objects.filter(server=server).order_by("id")
        return list(events.values_list("sql", "database", "tables"))

    assert values("a") == values("b")


def test_editing_an_event_through_the_view_never_edits_a_shared_statement(ingest_bytes) -> None:
    ingest_bytes(LOG)
    one, two = Event.objects.filter(sql="DELETE FROM orders WHERE id = 1", database="shop").order_by("id")
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_event SET sql = 'SELECT 1', \"user\" = 'nobody' WHERE id = %s", [one.pk])
    one.refresh_from_db()
    two.refresh_from_db()
    assert (one.sql, one.user, one.database, one.tables) == ("SELECT 1", "nobody", "shop", ["shop.orders"])
    assert (two.sql, two.user) == ("DELETE FROM orders WHERE id = 1", "app")
    assert one.statement_id != two.statement_id


def test_an_event_inserted_through_the_view_gets_its_statement_and_an_id(ingest_bytes) -> None:
    ingest_bytes(LOG)
    model = Event.objects.filter(command="Query").first()
    assert model is not None
    fields = {f.attname: getattr(model, f.attname) for f in Event._meta.concrete_fields}
    del fields["id"], fields["statement_id"]
    fields.update(sql="DROP TABLE shop.orders", record_hash=b"\x01" * 16)
    made = Event.objects.create(**fields)
    assert made.pk > model.pk
    stored = Event.objects.get(pk=made.pk)
    assert stored.sql == "DROP TABLE shop.orders"
    assert statement_of(stored).sql == "DROP TABLE shop.orders"


HOSTILE = (
    b"2026-11-25T05:00:00.000000Z\t    4 Connect\tapp@10.0.0.9 on shop using TCP/IP\n"
    b"2026-11-25T05:00:01.000000Z\t    4 Query\tDELETE FROM `we\"ird\\\\tab\tle` WHERE note = 'a\\\\b\\tc'\n"
    b"2026-11-25T05:00:02.000000Z\t    4 Query\tUPDATE `x,y{z}` SET v = '\xc3\xa9\\r\\n' WHERE k = 'NULL'\n"
    b"2026-11-25T05:00:03.000000Z\t    4 Query\tSELECT '\\\\N', \"\\\\\\\\\" FROM t\n"
)


def test_every_stored_statement_holds_its_values_exactly_and_their_key(ingest_bytes) -> None:
    """Statements go to the dictionary through a staging COPY: escapes of COPY text and of array
    literals (backslashes, tabs, quotes, commas, braces, a literal \\N) must come back as written,
    and each statement's key must be the digest of what is stored."""
    ingest_bytes(HOSTILE)
    events = list(Event.objects.exclude(command="Connect").order_by("id"))
    assert [e.sql for e in events] == [
        "DELETE FROM `we\"ird\\\\tab\tle` WHERE note = 'a\\\\b\\tc'",
        "UPDATE `x,y{z}` SET v = 'é\\r\\n' WHERE k = 'NULL'",
        "SELECT '\\\\N', \"\\\\\\\\\" FROM t",
    ]
    assert events[0].tables == ['shop.we"ird\\\\tab\tle']
    assert events[1].tables == ["shop.x,y{z}"]
    for s in Statement.objects.all():
        key = statement_key(s.database, s.statement_type, s.tables, s.destructive, s.fingerprint, s.sql)
        assert bytes(s.key) == key
