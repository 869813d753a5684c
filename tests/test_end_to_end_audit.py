"""The same question ("who deleted rows from the orders table?") asked of a MariaDB server_audit log.

tests/fixtures/server_audit/mariadb-10.11.19-scenario.log was written by the real
plugin (see regenerate.py there). Every record names its account, so attribution
does not depend on seeing the Connect; failed statements keep their error code.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from ingest.models import Event

from .conftest import FIXTURES

AUDIT = FIXTURES / "server_audit" / "mariadb-10.11.19-scenario.log"

pytestmark = pytest.mark.django_db(transaction=True)


def ingest(path: object) -> str:
    out = io.StringIO()
    call_command("ingest", str(path), "--server", "shop-db", stdout=out)  # --format auto
    return out.getvalue()


def test_the_api_names_who_deleted_from_the_orders_table(api_client) -> None:
    ingest(AUDIT)
    response = api_client.get("/api/v1/events/", {"table": "auditshop.orders", "destructive": "true"})
    rows = response.json()["results"]
    # Newest first; both in the same second, so in log order reversed.
    assert [
        (r["user"], r["host"], r["connection_id"], r["occurred_at"], r["sql"], r["status"]) for r in rows
    ] == [
        ("audit_bob", "127.0.0.1", 170, "2026-11-22T11:15:05.000000Z", "DELETE FROM orders", "ok"),
        (
            "audit_bob",
            "127.0.0.1",
            170,
            "2026-11-22T11:15:05.000000Z",
            "DELETE FROM orders WHERE id = 3",
            "ok",
        ),
    ]
    assert rows[1]["source"]["line"] == 65


def test_after_a_change_of_user_each_statement_keeps_its_own_account(api_client) -> None:
    # Connection 171 changed user (MariaDB 10.11 logs CHANGEUSER with empty fields); the
    # statements after it name audit_bob themselves, and the refused one keeps its code.
    ingest(AUDIT)
    rows = api_client.get("/api/v1/events/", {"connection_id": 171, "statement_type": "DELETE"}).json()[
        "results"
    ]
    assert [(r["user"], r["sql"], r["status"], "failed" in r["flags"]) for r in rows] == [
        ("audit_bob", "DELETE FROM customers WHERE name = 'Chloé'", "ok", False),
        ("audit_bob", "DELETE FROM no_such_table WHERE 1 = 0", "1146", True),
    ]


def test_failed_logins_are_kept_with_who_tried(api_client) -> None:
    ingest(AUDIT)
    rows = api_client.get("/api/v1/events/", {"flag": "failed"}).json()["results"]
    refused = {(r["user"], r["command"], r["status"]) for r in rows if r["command"] == "Connect"}
    assert refused == {("audit_mallory", "Connect", "denied"), ("audit_alice", "Connect", "denied")}


def test_table_events_name_their_table_and_are_not_counted_twice(api_client) -> None:
    ingest(AUDIT)
    writes = Event.objects.filter(command="Table WRITE", tables__contains=["auditshop.orders"])
    assert writes.exists()
    assert not writes.filter(destructive=True).exists()
    assert Event.objects.filter(command="Table READ", tables__contains=["mysql.table_stats"]).exists()


def test_ingesting_the_audit_log_again_stores_nothing_new(api_client) -> None:
    ingest(AUDIT)
    count = Event.objects.count()
    assert count == len(AUDIT.read_bytes().splitlines())
    assert f"0 events stored ({count} already there)" in ingest(AUDIT)


def test_a_rename_record_names_the_old_and_the_new_table_each_qualified(
    api_client, investigator_client
) -> None:
    # The plugin writes RENAME TABLE customers TO clients as one TABLE record whose object is
    # "customers|auditshop.clients": two tables, not one named after both.
    ingest(AUDIT)
    rename = Event.objects.get(command="Table RENAME")
    assert (rename.line, rename.sql, rename.database) == (91, "customers|auditshop.clients", "auditshop")
    assert rename.tables == ["auditshop.customers", "auditshop.clients"]
    assert [name for e in Event.objects.all() for name in e.tables if "|" in name] == []

    names = [t["name"] for t in api_client.get("/api/v1/tables/", {"page_size": 100}).json()["results"]]
    assert "auditshop.customers" in names and "auditshop.clients" in names
    assert [n for n in names if "|" in n] == []
    page = investigator_client.get("/tables/").content.decode()
    assert "auditshop.customers" in page and "customers|auditshop.clients" not in page

    for table in ("auditshop.customers", "auditshop.clients"):
        history = api_client.get(f"/api/v1/tables/{table}/history/").json()["results"]
        assert 91 in [r["source"]["line"] for r in history], table
    # Under its old name, the table's history goes on under the new one from the rename on.
    old = api_client.get("/api/v1/tables/auditshop.customers/history/").json()
    assert [n["name"] for n in old["later_names"]] == ["auditshop.clients"]
