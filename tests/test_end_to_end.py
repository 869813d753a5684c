"""From a real MariaDB general log to "who deleted rows from shop.orders?", over the public surfaces.

The log is tests/fixtures/genlog/mariadb-10.11.19-scenario.log, written by the real
server (see regenerate.py there): alice updates an order through a binary-protocol
prepared statement, the server restarts, then bob deletes from shop.orders twice.
It is ingested with `manage.py ingest` and questioned over the REST API.
"""

from __future__ import annotations

import gzip
import io
import shutil

import pytest
from django.core.management import call_command

from ingest.models import Event, ParseProblem

from .conftest import FIXTURES

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"

pytestmark = pytest.mark.django_db(transaction=True)


def ingest(*paths: object, server: str = "shop-db") -> str:
    out = io.StringIO()
    call_command("ingest", *map(str, paths), "--server", server, "--timezone", "UTC", stdout=out)
    return out.getvalue()


def destructive_on_orders(api_client) -> list[dict]:
    response = api_client.get("/api/v1/events/", {"table": "shop.orders", "destructive": "true"})
    assert response.status_code == 200, response.content
    assert response.json()["next"] is None
    return response.json()["results"]


def test_the_api_names_who_deleted_from_shop_orders(api_client) -> None:
    ingest(SCENARIO)
    rows = destructive_on_orders(api_client)
    # Newest first. Each line of the log that wrote to shop.orders, and nothing else.
    assert [
        (r["user"], r["host"], r["connection_id"], r["occurred_at"], r["command"], r["sql"]) for r in rows
    ] == [
        ("bob", "127.0.0.1", 5, "2026-11-22T08:48:22.000000Z", "Query", "DELETE FROM orders"),
        ("bob", "127.0.0.1", 5, "2026-11-22T08:48:22.000000Z", "Query", "DELETE FROM orders WHERE id = 3"),
        (
            "alice",
            "127.0.0.1",
            103,
            "2026-11-22T08:48:20.000000Z",
            "Execute",
            "UPDATE orders SET status = 'shipped' WHERE id = 2",
        ),
    ]
    delete_all = rows[0]
    assert delete_all["statement_type"] == "DELETE"
    assert delete_all["tables"] == ["shop.orders"]
    assert delete_all["database"] == "shop"  # from bob's `Init DB shop`
    assert "unattributed" not in delete_all["flags"]
    assert "prepared" in rows[2]["flags"]
    # Where the evidence is: the exact line of the file.
    lines = SCENARIO.read_bytes().split(b"\n")
    source = delete_all["source"]
    assert lines[source["line"] - 1] == b"\t\t     5 Query\tDELETE FROM orders"
    assert SCENARIO.read_bytes()[source["offset"] :].startswith(b"\t\t     5 Query\tDELETE FROM orders\n")
    assert source["file"].endswith(SCENARIO.name)


def test_the_same_connection_id_after_the_restart_is_another_session(api_client) -> None:
    ingest(SCENARIO)
    before = Event.objects.filter(connection_id=5, occurred_at__lt="2026-11-22T08:48:21Z")
    after = Event.objects.filter(connection_id=5, occurred_at__gte="2026-11-22T08:48:21Z")
    assert after.exists()
    assert {e.session_id for e in before}.isdisjoint({e.session_id for e in after})
    # The Quit of connection 4, whose Connect the restarted server never logged, is not guessed.
    quit_4 = Event.objects.get(connection_id=4, command="Quit", occurred_at__gte="2026-11-22T08:48:21Z")
    assert quit_4.user is None
    assert "unattributed" in quit_4.flags


def test_ingesting_again_plain_or_gzipped_stores_nothing_new(api_client, tmp_path) -> None:
    summary = ingest(SCENARIO)
    count = Event.objects.count()
    assert f"{count} events stored (0 already there)" in summary
    assert count > 50

    summary = ingest(SCENARIO)
    assert Event.objects.count() == count
    assert f"0 events stored ({count} already there)" in summary

    # The same log rotated and compressed elsewhere: same records, nothing new.
    gz = tmp_path / "general.log.1.gz"
    with SCENARIO.open("rb") as plain, gzip.open(gz, "wb") as packed:
        shutil.copyfileobj(plain, packed)
    ingest(gz)
    assert Event.objects.count() == count
    assert len(destructive_on_orders(api_client)) == 3


def test_a_gzipped_log_alone_gives_the_same_answer(api_client, tmp_path) -> None:
    gz = tmp_path / "general.log.gz"
    gz.write_bytes(gzip.compress(SCENARIO.read_bytes()))
    ingest(gz)
    rows = destructive_on_orders(api_client)
    assert [(r["user"], r["sql"]) for r in rows] == [
        ("bob", "DELETE FROM orders"),
        ("bob", "DELETE FROM orders WHERE id = 3"),
        ("alice", "UPDATE orders SET status = 'shipped' WHERE id = 2"),
    ]
    assert rows[0]["source"]["file"].endswith("general.log.gz")
    # Positions are in the decompressed stream: the same as in the plain file.
    plain = SCENARIO.read_bytes()
    assert plain[rows[0]["source"]["offset"] :].startswith(b"\t\t     5 Query\tDELETE FROM orders\n")


def test_bytes_that_are_no_record_become_stored_problems_the_rest_is_kept(api_client, tmp_path) -> None:
    # A copy that begins in the middle of a record (binary junk), and an impossible time later on.
    junk = b"\xff\xfe\x00half a line from a disk error\n"
    data = SCENARIO.read_bytes()
    bad_time = data.replace(b"261122  8:48:23\t", b"261322  8:48:23\t")  # month 13
    assert bad_time != data
    path = tmp_path / "damaged.log"
    path.write_bytes(junk + bad_time)

    summary = ingest(path)
    problems = list(ParseProblem.objects.order_by("offset"))
    assert [(p.line, p.offset) for p in problems] == [
        (1, 0),
        (bad_time.count(b"\n", 0, bad_time.index(b"261322")) + 2, len(junk) + bad_time.index(b"261322")),
    ]
    assert bytes(problems[0].excerpt) == junk
    assert "not a general log record" in problems[0].reason
    assert "invalid time" in problems[1].reason
    assert ", 2 problems," in summary
    # The record with the impossible time is kept, with its time unknown; nothing was lost.
    update = Event.objects.get(connection_id=6, statement_type="UPDATE")
    assert update.occurred_at is None
    assert "time_unknown" in update.flags
    assert len(destructive_on_orders(api_client)) == 3
