"""Tables: the names seen (kept list and what came since), and one table's history under all its names."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from investigations.models import TableCatalogue, TableSeen
from investigations.query import tables
from investigations.query.tables import tables_seen, tables_seen_refresh, tables_seen_refresh_due
from tests.investigations.logs import genlog

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


RENAMES = genlog(
    (at(0), 3, "Connect", "bob@db1 on shop using TCP/IP"),
    (at(30), 3, "Query", "DELETE FROM orders_old WHERE id = 9"),  # another table of that name, then
    (at(60), 3, "Query", "DELETE FROM orders WHERE id = 1"),
    (at(70), 3, "Query", "RENAME TABLE orders TO orders_old"),
    (at(80), 3, "Query", "ALTER TABLE orders_old RENAME TO orders_2025"),
    (at(85), 4, "Connect", "carol@db2 on shop using TCP/IP"),
    (at(86), 4, "Query", "SELECT * FROM orders_2025"),
    (at(90), 3, "Query", "DROP TABLE orders_2025"),
    (at(100), 3, "Query", "CREATE TABLE orders (id INT)"),
)


def history(html: str) -> list[str]:
    body = html.split('<h2 id="h-history">', 1)[1]
    return [re.sub(r"<[^>]+>", "", s) for s in re.findall(r'<td class="sql">(.*?)</td>', body, re.S)]


def test_the_table_page_follows_the_table_under_its_later_names(investigator_client, ingest_bytes) -> None:
    ingest_bytes(RENAMES)
    html = investigator_client.get("/tables/shop.orders/?tz=UTC").content.decode()
    assert history(html) == [
        "CREATE TABLE orders (id INT)",
        "DROP TABLE orders_2025",
        "SELECT * FROM orders_2025",
        "ALTER TABLE orders_old RENAME TO orders_2025",
        "RENAME TABLE orders TO orders_old",
        "DELETE FROM orders WHERE id = 1",
    ]  # not the DELETE on the orders_old that existed before the rename
    assert 'it is <a href="/tables/shop.orders_old/">shop.orders_old</a>' in html
    assert 'it is <a href="/tables/shop.orders_2025/">shop.orders_2025</a>' in html


def test_the_table_page_says_who_changed_or_dropped_it(investigator_client, ingest_bytes) -> None:
    ingest_bytes(RENAMES)
    html = investigator_client.get("/tables/shop.orders/").content.decode()
    changers = html.split("Who changed or dropped it", 1)[1].split("Everything that touched it", 1)[0]
    rows = re.findall(r'<td>(\w+)@(\w+)</td>\s*<td><span class="badge [a-z-]+">([A-Z ]+)</span>', changers)
    assert sorted(rows) == [
        ("bob", "db1", "ALTER TABLE"), ("bob", "db1", "DELETE"), ("bob", "db1", "DROP TABLE"),
        ("bob", "db1", "RENAME TABLE"),
    ]  # fmt: skip
    assert "carol" not in changers  # she only read it


def test_statements_naming_the_table_without_a_database_are_said_not_counted(
    investigator_client, ingest_bytes
) -> None:
    """A connection that began before the log has no known database: its DELETE FROM orders may be
    shop.orders', and the page says so instead of leaving it out unsaid."""
    ingest_bytes(RENAMES)
    ingest_bytes(genlog((at(120), 77, "Query", "DELETE FROM orders WHERE id = 5"),
                        (at(121), 77, "Query", "DELETE FROM orders WHERE id = 6"),
                        (at(122), 77, "Query", "SELECT * FROM orders")), name="before.log")  # fmt: skip
    html = investigator_client.get("/tables/shop.orders/").content.decode()
    changers = html.split("Who changed or dropped it", 1)[1].split("Everything that touched it", 1)[0]
    note = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", changers.split('class="hint unqualified"', 1)[1]))
    assert "2 destructive statements name a table orders with no database" in note
    assert 'href="/events/?table=orders&amp;destructive=true"' in changers
    assert "unknown" not in changers.split('class="hint unqualified"', 1)[0]  # not counted as its own
    # a table whose name no statement uses bare says nothing of the kind
    html = investigator_client.get("/tables/shop.orders_2025/").content.decode()
    assert "unqualified" not in html


def test_the_later_name_knows_what_it_was_called_before(investigator_client, ingest_bytes) -> None:
    ingest_bytes(RENAMES)
    html = investigator_client.get("/tables/shop.orders_2025/").content.decode()
    assert 'It was <a href="/tables/shop.orders_old/">shop.orders_old</a>' in html


def test_destructive_only_keeps_the_changes(investigator_client, ingest_bytes) -> None:
    ingest_bytes(RENAMES)
    html = investigator_client.get("/tables/shop.orders/?destructive=true").content.decode()
    assert "SELECT * FROM orders_2025" not in history(html) and "DROP TABLE orders_2025" in history(html)


def test_the_list_shows_names_of_events_stored_since_it_was_kept(investigator_client, ingest_bytes) -> None:
    ingest_bytes(RENAMES)
    listing = tables_seen("", 100)
    assert listing.refreshed_at is None  # never rebuilt: every name comes from the newest events
    names = [t.name for t in listing.tables]
    assert names == ["shop.orders", "shop.orders_2025", "shop.orders_old"]
    html = investigator_client.get("/tables/").content.decode()
    assert 'href="/tables/shop.orders_2025/"' in html


def test_the_list_shows_new_names_however_high_the_event_ids_are(ingest_bytes) -> None:
    """Event ids come from a sequence that others advance too (rolled-back batches, other
    stores' tests): a few new events with ids far above the kept list's are still few."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('ingest_event_row', 'id'), %s)", [tables.FRESH_MAX * 5]
        )
    ingest_bytes(RENAMES)
    listing = tables_seen("", 100)
    assert [t.name for t in listing.tables] == ["shop.orders", "shop.orders_2025", "shop.orders_old"]
    assert listing.unlisted == 0


def test_a_rebuild_keeps_counts_and_the_list_adds_what_came_after(ingest_bytes) -> None:
    ingest_bytes(RENAMES)
    assert tables_seen_refresh() == 3
    kept = {t.name: (t.events, t.destructive) for t in TableSeen.objects.all()}
    assert kept == {"shop.orders": (3, 2), "shop.orders_old": (3, 3), "shop.orders_2025": (3, 2)}
    ingest_bytes(genlog((at(200), 5, "Query", "DELETE FROM shop.invoices")), name="later.log")
    names = [t.name for t in tables_seen("", 100).tables]
    assert "shop.invoices" in names and TableSeen.objects.filter(name="shop.invoices").count() == 0
    assert [t.name for t in tables_seen("INVOI", 100).tables] == ["shop.invoices"]  # any case


def test_a_rebuild_is_queued_once_when_the_list_is_stale(
    ingest_bytes, django_capture_on_commit_callbacks
) -> None:
    ingest_bytes(RENAMES)
    queued = []
    with django_capture_on_commit_callbacks(execute=True):
        assert tables_seen_refresh_due(lambda: queued.append(1))
        assert not tables_seen_refresh_due(lambda: queued.append(2))  # claimed already
    assert queued == [1]
    tables_seen_refresh()
    assert TableCatalogue.objects.get().refreshing_since is None
    assert not tables_seen_refresh_due(lambda: queued.append(3))  # fresh


def test_too_many_new_events_are_not_looked_through_on_the_fly(ingest_bytes, monkeypatch) -> None:
    ingest_bytes(RENAMES)
    monkeypatch.setattr(tables, "FRESH_MAX", 2)
    listing = tables_seen("", 100)
    assert listing.tables == [] and listing.unlisted > 2


def test_the_search_narrows_the_list_and_says_when_nothing_matches(investigator_client, ingest_bytes) -> None:
    ingest_bytes(RENAMES)
    html = investigator_client.get("/tables/?q=2025").content.decode()
    assert "shop.orders_2025" in html and "shop.orders_old" not in html
    assert "No table name contains" in investigator_client.get("/tables/?q=zzz").content.decode()
    partial = investigator_client.get("/tables/?q=old", HTTP_HX_REQUEST="true").content.decode()
    assert "shop.orders_old" in partial and "<form" not in partial


def test_an_empty_list_says_what_to_do(investigator_client) -> None:
    assert "No tables seen yet" in investigator_client.get("/tables/").content.decode()


def test_a_table_named_with_slashes_and_newlines_has_a_page(investigator_client, ingest_bytes) -> None:
    ingest_bytes(genlog((at(0), 3, "Query", "DELETE FROM `we/ird\nname` WHERE 1")))
    html = investigator_client.get("/tables/").content.decode()
    link = re.search(r'href="(/tables/[^"]*we%2F[^"]*|/tables/[^"]*we/ird[^"]*)"', html).group(1)
    page = investigator_client.get(link.replace("&amp;", "&"))
    assert page.status_code == 200 and "DELETE FROM `we/ird" in page.content.decode()
