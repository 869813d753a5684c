"""The history of a table follows it under the names it is given later."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

LOG = (
    b"2026-01-05T08:00:00.000000Z\t    3 Connect\tbob@db1 on shop using TCP/IP\n"
    b"2026-01-05T08:30:00.000000Z\t    3 Query\tDELETE FROM orders_old WHERE id = 9\n"  # another table, then
    b"2026-01-05T09:00:00.000000Z\t    3 Query\tDELETE FROM orders WHERE id = 1\n"
    b"2026-01-05T09:10:00.000000Z\t    3 Query\tRENAME TABLE orders TO orders_old\n"
    b"2026-01-05T09:20:00.000000Z\t    3 Query\tALTER TABLE orders_old RENAME TO orders_2025\n"
    b"2026-01-05T09:30:00.000000Z\t    3 Query\tDROP TABLE orders_2025\n"
    b"2026-01-05T09:40:00.000000Z\t    3 Query\tCREATE TABLE orders (id INT)\n"
)


@pytest.mark.parametrize("table", ["shop.orders", "orders"])
def test_asking_about_orders_finds_the_rename_chain_and_the_drop(api_client, ingest_bytes, table) -> None:
    ingest_bytes(LOG)
    rows = api_client.get("/api/v1/events/", {"table": table}).json()["results"]
    assert [r["sql"] for r in rows] == [
        "CREATE TABLE orders (id INT)",
        "DROP TABLE orders_2025",
        "ALTER TABLE orders_old RENAME TO orders_2025",
        "RENAME TABLE orders TO orders_old",
        "DELETE FROM orders WHERE id = 1",
    ]  # not the DELETE on the orders_old that existed before the rename


def test_asking_about_the_old_name_does_not_pull_in_the_new_table(api_client, ingest_bytes) -> None:
    ingest_bytes(LOG)
    rows = api_client.get("/api/v1/events/", {"table": "shop.orders_2025"}).json()["results"]
    assert [r["sql"] for r in rows] == [
        "DROP TABLE orders_2025",
        "ALTER TABLE orders_old RENAME TO orders_2025",
    ]
