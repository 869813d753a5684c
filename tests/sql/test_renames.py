"""rename_pairs: which table became which, in the statement's order."""

from __future__ import annotations

import pytest

from ingest.sql.renames import rename_pairs


@pytest.mark.parametrize(
    ("sql", "pairs"),
    [
        ("RENAME TABLE orders TO orders_old", [("shop.orders", "shop.orders_old")]),
        ("rename table shop.a to shop.b, `c` TO `x`.`d`", [("shop.a", "shop.b"), ("shop.c", "x.d")]),
        ("RENAME TABLE `we``ird` TO other", [("shop.we`ird", "shop.other")]),
        ("ALTER TABLE orders RENAME TO orders_old", [("shop.orders", "shop.orders_old")]),
        ("ALTER TABLE orders RENAME orders_old", [("shop.orders", "shop.orders_old")]),
        ("alter table orders add c int, rename as o2", [("shop.orders", "shop.o2")]),
        ("ALTER TABLE orders RENAME COLUMN a TO b", []),
        ("ALTER TABLE orders RENAME INDEX a TO b", []),
        ("SELECT 'RENAME TABLE a TO b'", []),
    ],
)
def test_rename_pairs(sql: str, pairs: list[tuple[str, str]]) -> None:
    assert rename_pairs(sql, "shop") == pairs


def test_without_a_current_database_names_stay_as_written() -> None:
    assert rename_pairs("RENAME TABLE a TO b", None) == [("a", "b")]
