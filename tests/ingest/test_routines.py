"""A CALL is marked with what the procedure's body does, when its CREATE is in the logs."""

from __future__ import annotations

import pytest

from ingest.sql.routines import called_procedure, procedure_definition

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("sql", "name", "destructive", "tables"),
    [
        ("CREATE PROCEDURE purge() BEGIN DELETE FROM orders; UPDATE stats SET n = 0; END", "shop.purge", True,
         ("shop.orders", "shop.stats")),
        ("CREATE DEFINER=`root`@`localhost` PROCEDURE crm.p(IN x INT) DELETE FROM clients WHERE id = x",
         "crm.p", True, ("crm.clients",)),
        ("CREATE PROCEDURE r() SQL SECURITY INVOKER COMMENT 'x' BEGIN SELECT 1; END", "shop.r", False, ()),
        ("create procedure `we``ird`() label: begin truncate t; end label", "shop.we`ird", True, ("shop.t",)),
    ],
)  # fmt: skip
def test_procedure_bodies(sql: str, name: str, destructive: bool, tables: tuple[str, ...]) -> None:
    found = procedure_definition(sql, "shop")
    assert found is not None
    assert (found[0], found[1].destructive, found[1].tables) == (name, destructive, tables)
    quoted = ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))
    assert called_procedure(f"CALL {quoted}(1)", "x") == name


def test_a_call_of_a_known_procedure_is_found_as_what_it_deletes(api_client, ingest_bytes) -> None:
    ingest_bytes(
        b"2026-01-05T09:00:00.000000Z\t    3 Connect\troot@localhost on shop using Socket\n"
        b"2026-01-05T09:00:01.000000Z\t    3 Query\tCREATE PROCEDURE purge_old() BEGIN\n"
        b"  DELETE FROM orders WHERE created < NOW() - INTERVAL 1 YEAR;\nEND\n"
        b"2026-01-05T09:10:00.000000Z\t    4 Connect\tmallory@10.6.6.6 on shop using TCP/IP\n"
        b"2026-01-05T09:10:01.000000Z\t    4 Query\tCALL purge_old()\n"
        b"2026-01-05T09:10:02.000000Z\t    4 Query\tCALL unknown_proc()\n"
        b"2026-01-05T09:20:00.000000Z\t    3 Query\tDROP PROCEDURE purge_old\n"
        b"2026-01-05T09:20:01.000000Z\t    4 Query\tCALL purge_old()\n"  # it no longer exists
    )
    rows = api_client.get("/api/v1/events/", {"table": "shop.orders", "destructive": "true"}).json()[
        "results"
    ]
    assert [(r["user"], r["sql"], "routine" in r["flags"]) for r in rows] == [
        ("mallory", "CALL purge_old()", True)
    ]
    calls = api_client.get("/api/v1/events/", {"statement_type": "CALL"}).json()["results"]
    assert [(r["sql"], r["destructive"]) for r in calls] == [
        ("CALL purge_old()", False),
        ("CALL unknown_proc()", False),
        ("CALL purge_old()", True),
    ]
