"""MySQL 8 binlogs through `manage.py ingest` into the store, and their rows read back from it
(tests/fixtures/binlog_mysql: real MySQL files, see its PROVENANCE.md)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from ingest.binlog.images import row_images
from ingest.binlog.metadata import Transaction, scan_file
from ingest.models import BinlogChange, BinlogStatement, BinlogTransaction, ParseProblem
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
