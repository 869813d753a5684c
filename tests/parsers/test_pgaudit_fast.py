"""The pgAudit parser's fast paths read what the slow ones read (issue 23)."""

from __future__ import annotations

import csv

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.parsers.pgaudit import _split_entry, parse_entry

# AUDIT messages are built of these: field separators, quotes, line ends and ordinary text.
_PIECES = st.sampled_from(
    [",", '"', '""', "\n", "\r", "SESSION", "OBJECT", "1", "2", "WRITE", "UPDATE", "TABLE", "shop.orders",
     "<not logged>", "<none>", "a b", "'x'", "\x00", "é", " "]
)  # fmt: skip


def _by_csv(body: str) -> list[str] | None:
    try:
        return next(csv.reader((body,), strict=True))
    except (csv.Error, StopIteration):
        return None


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_it_splits_every_message_as_the_csv_module_or_leaves_it_to_it(body: str) -> None:
    fields = _split_entry(body)
    if fields is not None:
        assert fields == _by_csv(body)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(["UPDATE t SET a = 1", ",", '"', "\n", "x"]), max_size=8).map("".join),
    st.sampled_from(["<not logged>", "<none>", '"1,2"', "a"]),
    st.sampled_from(["", ",3", ",x"]),
)
def test_it_reads_a_quoted_statement_like_the_csv_module(statement: str, parameter: str, rows: str) -> None:
    quoted = '"' + statement.replace('"', '""') + '"'
    body = f"SESSION,4,1,WRITE,UPDATE,TABLE,shop.orders,{quoted},{parameter}{rows}"
    fields = _split_entry(body)
    assert fields is not None or '"' in parameter
    assert (fields or _by_csv(body)) == _by_csv(body)
    entry = parse_entry("AUDIT: " + body)
    assert entry is not None
    assert entry.statement == statement
    assert entry.object_name == "shop.orders"


def test_it_splits_the_usual_entries_without_the_csv_module() -> None:
    plain = "SESSION,9,1,WRITE,UPDATE,,,UPDATE pgbench_accounts SET abalance = 0 WHERE aid = 1;,<not logged>"
    quoted = 'SESSION,12,1,WRITE,INSERT,,,"INSERT INTO h (tid, bid) VALUES (16, 2);",<not logged>'
    assert _split_entry(plain) == _by_csv(plain)
    assert _split_entry(quoted) == _by_csv(quoted)
    entry = parse_entry("AUDIT: " + quoted)
    assert entry is not None
    assert (entry.statement_id, entry.command, entry.statement, entry.parameter) == (
        12,
        "INSERT",
        "INSERT INTO h (tid, bid) VALUES (16, 2);",
        None,
    )
