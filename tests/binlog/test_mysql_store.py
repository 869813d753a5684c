"""MySQL 8 binlogs through `manage.py ingest` into the store, and their rows read back from it
(tests/fixtures/binlog_mysql: real MySQL files, see its PROVENANCE.md)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from ingest.binlog.images import row_images
from ingest.binlog.metadata import Transaction, scan_file
from ingest.models import BinlogChange, BinlogStatement, BinlogTransaction, Event, ParseProblem
from investigations.query.binlog import rows_page

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_mysql"
pytestmark = pytest.mark.django_db


def _ingest(*names: str) -> str:
    out = io.StringIO()
    call_command("ingest", *(str(SAMPLES / n) for n in names), "--server", "mysql8", stdout=out)
    return out.getvalue()


def test_a_compressed_transaction_is_stored_and_its_rows_are_read_back_from_the_payload() -> None:
    _ingest("mysql-bin.compressed", "transaction_compression.000001")
    assert BinlogTransaction.objects.count() == 2
    assert sorted(BinlogTransaction.objects.values_list("thread_id", flat=True)) == [12, 107]
    # Rows events inside a payload are stored by their address (negative: payload.py).
    assert all(p < 0 for c in BinlogChange.objects.all() for p in [c.table_map_position, *c.positions])
    assert not ParseProblem.objects.exists()
    for name in ("mysql-bin.compressed", "transaction_compression.000001"):
        statement = BinlogStatement.objects.get(transaction__file__name=name)
        page = rows_page([statement], offset=0, limit=10)
        with (SAMPLES / name).open("rb") as f:
            (tx,) = [t for t in scan_file(str(SAMPLES / name)) if isinstance(t, Transaction)]
            want = [image.as_json() for image in row_images(f, tx.statements[-1].changes[0])]
        assert page.rows == want and page.total == len(want) == 1


def test_what_a_mysql_file_holds_that_is_not_read_is_a_stored_problem_with_its_position() -> None:
    _ingest("mysql-bin.aurora-padding", "binlog_transaction_with_GTID_TAG.000001")
    problems = dict(ParseProblem.objects.values_list("offset", "reason"))
    assert "type 100" in problems[281] and 245 not in problems
    tagged = BinlogStatement.objects.get(transaction__file__name__startswith="binlog_transaction")
    assert tagged.rows == 1 and tagged.transaction.gtid == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"


def test_ingesting_the_samples_twice_stores_nothing_new() -> None:
    names = ["mysql-bin.checksum-crc32", "mysql-enum-string-set.000001", "json.binlog.000001"]
    _ingest(*names)
    counts = (BinlogTransaction.objects.count(), BinlogStatement.objects.count())
    _ingest(*names)
    assert (BinlogTransaction.objects.count(), BinlogStatement.objects.count()) == counts
    assert counts[0] == 60 + 5 + 8


def _general_log(path: Path) -> Path:
    """A MySQL 8 general log for 01-basic-crud.binlog, written here: that sample comes without
    one. Its statements are the scenario's SQL as the binlog's ROWS_QUERY events carry it, sent
    by connection 13 (the thread of the binlog's BEGINs) at the binlog's second; connection 14,
    another account, sends the same DELETE in the same second (it found nothing to delete, so the
    binlog has no rows for it). Only the thread id in MySQL's BEGIN can tell the two apart."""
    txs = [t for t in scan_file(str(SAMPLES / "01-basic-crud.binlog")) if isinstance(t, Transaction)]
    when = "2026-04-28T22:14:01.{:06d}Z"  # the binlog's time: 1777414441
    lines = [
        "/usr/sbin/mysqld, Version: 8.0.46 (MySQL Community Server - GPL). started with:",
        "Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock",
        "Time                 Id Command    Argument",
        f"{when.format(1)}\t   13 Connect\troot@localhost on binlogtest using Socket",
        f"{when.format(2)}\t   14 Connect\tmallory@10.0.0.9 on binlogtest using TCP/IP",
    ]
    n = 3
    for tx in txs:
        for s in tx.statements:
            text = s.text
            lines.append(f"{when.format(n)}\t   13 Query\t{text}")
            n += 1
            if text and text.startswith("DELETE"):
                lines.append(f"{when.format(n)}\t   14 Query\t{text}")
                n += 1
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_mysql_8_delete_is_tied_to_its_connection_by_the_thread_id_of_begin(
    tmp_path: Path, api_client: Any
) -> None:
    general = _general_log(tmp_path / "general.log")
    out = io.StringIO()
    call_command(
        "ingest", str(SAMPLES / "01-basic-crud.binlog"), str(general), "--server", "mysql8", stdout=out
    )
    deletes = Event.objects.filter(server="mysql8", statement_type="DELETE").order_by("connection_id")
    ours, mallorys = list(deletes)
    assert (ours.connection_id, mallorys.connection_id) == (13, 14)
    answer = api_client.get(f"/api/v1/events/{ours.pk}/rows/").json()
    assert answer["confidence"] == "thread_id" and answer["rows_changed"] == 1
    assert answer["rows"] == [
        {
            "table": "binlogtest.items",
            "change": "delete",
            "before": {"id": 2, "sku": "sku-0002", "qty": 25, "created_at": "2026-04-28 22:14:01"},
            "after": None,
        }
    ]  # 01-basic-crud.sql: INSERT ('sku-0002', 25) as the second row, then DELETE ... 'sku-0002'
    assert api_client.get(f"/api/v1/events/{mallorys.pk}/rows/").json()["rows_changed"] in (0, None)
    flashback = api_client.get(f"/api/v1/events/{ours.pk}/flashback/").content.decode()
    assert (
        "INSERT INTO `binlogtest`.`items` (`id`, `sku`, `qty`, `created_at`) VALUES (2, 'sku-0002', 25,"
        in flashback
    )
    # Every row statement of the file is tied to connection 13's statement by the thread id.
    for event in Event.objects.filter(
        server="mysql8", connection_id=13, statement_type__in=["INSERT", "UPDATE"]
    ):
        shown = api_client.get(f"/api/v1/events/{event.pk}/rows/").json()
        assert shown["confidence"] == "thread_id" and shown["rows_changed"] >= 1, event.sql
