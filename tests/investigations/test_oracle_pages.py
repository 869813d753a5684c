"""Oracle events in the investigator's pages: the event page's SCN, transaction, binds (masked
where they may hold a secret), the Flashback Query hint and the note that audit rows are written
for statements later rolled back; the explorer's table and flag filters; the alerts' gaps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from ingest.models import Event, Gap, Source
from ingest.pipeline import ingest_oracle_table

from ..fixtures.oracle_scene.scene import ROWS, to_csv, to_json, to_xml
from ..ingest.test_oracle_pull import FakeTrail

pytestmark = pytest.mark.django_db


def _page(client, event: Event) -> str:
    response = client.get(reverse("event-detail", args=[event.pk]))
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    ("name", "write"), [("trail.csv", to_csv), ("trail.json", to_json), ("ora_1_1.xml", to_xml)]
)
def test_the_delete_shows_its_scn_transaction_and_the_flashback_hint(
    investigator_client, ingest_bytes, name, write
):
    ingest_bytes(write(ROWS), name=name, server="ora1")
    delete = Event.objects.get(server="ora1", statement_type="DELETE", user="SCOTT")
    page = _page(investigator_client, delete)
    assert 'id="oracle-scn" class="mono">5000123<' in page
    assert 'id="oracle-transaction" class="mono">0A001F00A1030000<' in page
    assert "a statement later rolled back is still here" in page
    assert "xid = HEXTORAW('0A001F00A1030000')" in page
    assert "SELECT * FROM SHOP.ORDERS AS OF SCN 5000123" in page


def test_binds_are_shown_and_masked_where_they_may_hold_a_secret(investigator_client, ingest_bytes):
    ingest_bytes(to_csv(ROWS), name="trail.csv", server="ora1")
    select = Event.objects.get(server="ora1", statement_type="SELECT")
    assert 'id="oracle-binds"> #1(2):42<' in _page(investigator_client, select)
    secret = Event.objects.get(server="ora1", user="MALLORY", statement_type="UPDATE")
    assert "secret_masked" in secret.flags
    page = _page(investigator_client, secret)
    assert "s3cr3t" not in page and "#*(*):*****" in page
    altered = Event.objects.get(server="ora1", statement_type="ALTER USER")
    assert "tiger" not in _page(investigator_client, altered)


def test_a_csv_rows_facts_need_its_file_and_the_page_says_so(investigator_client, ingest_bytes, tmp_path):
    run = ingest_bytes(to_csv(ROWS), name="trail.csv", server="ora1", fmt="oracle-csv")
    (tmp_path / "trail.csv").unlink()
    delete = Event.objects.get(
        server="ora1", statement_type="DELETE", user="SCOTT", source_file__source=run.source
    )
    page = _page(investigator_client, delete)
    assert "header line is not readable any more" in page
    assert 'id="oracle-scn" class="mono">not in this record<' in page


def test_a_pulled_rows_page_reads_its_own_raw_row(investigator_client):
    source = Source.objects.create(
        name="ora2: trail", kind=Source.Kind.ORACLE_TABLE, dsn="oracle://auditweb@db2/ORCL", server="ora2"
    )
    ingest_oracle_table(source, FakeTrail(ROWS))
    merge = Event.objects.get(server="ora2", statement_type="MERGE")
    page = _page(investigator_client, merge)
    assert 'id="oracle-transaction" class="mono">0C000500AA050000<' in page
    purge = Event.objects.get(server="ora2", statement_type="PURGE DBA_RECYCLEBIN")
    assert "connected through proxy user <strong>APP_PROXY</strong>" in _page(investigator_client, purge)


def test_a_mysql_event_shows_no_oracle_facts(investigator_client, ingest_bytes):
    ingest_bytes(
        b"2026-11-20T08:00:00.000000Z\t    5 Connect\tbob@web1 on shop using TCP/IP\n"
        b"2026-11-20T08:00:01.000000Z\t    5 Query\tDELETE FROM orders\n",
        name="general.log",
        server="my1",
    )
    delete = Event.objects.get(server="my1", statement_type="DELETE")
    assert "oracle-scn" not in _page(investigator_client, delete)


def test_the_explorer_finds_oracle_tables_as_oracle_writes_them(investigator_client, ingest_bytes):
    ingest_bytes(to_json(ROWS), name="trail.json", server="ora1")
    response = investigator_client.get(reverse("events"), {"table": "Shop.Audit Copy"})
    assert response.status_code == 200
    shown = response.content.decode()
    assert "DROP TABLE &quot;Shop&quot;.&quot;Audit Copy&quot; PURGE" in shown
    anti = investigator_client.get(
        reverse("events"), {"flag": "anti_forensic", "server": "ora1"}
    ).content.decode()
    for sql in (
        "NOAUDIT POLICY shop_dml_pol",
        "DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL",
        "DROP AUDIT POLICY shop_dml_pol",
    ):
        assert sql in anti
    purged = Gap.objects.get(server="ora1", reason="purged")
    assert purged.ended_at == datetime(2026, 11, 20, 8, 12, 30, tzinfo=UTC)


def test_an_oracle_table_source_is_made_in_the_form_and_its_refused_connection_is_its_health(monkeypatch):
    from ingest.follow import ingest_source
    from ingest.sources import SourceForm

    form = SourceForm(
        data={
            "name": "orcl9 trail",
            "kind": "oracle-table",
            "dsn": "oracle://auditweb@127.0.0.1:9/ORCLPDB1",
            "password_env": "AUDITWEB_SOURCE_ORACLE_PASSWORD",
            "format": "auto",
            "server": "orcl9",
            "timezone": "UTC",
            "interval_seconds": 60,
            "quiet_seconds": 3600,
            "enabled": True,
        }
    )
    assert form.is_valid(), form.errors
    source = form.save()
    assert source.pulls_rows
    bad = SourceForm(data={**form.data, "name": "x", "dsn": "oracle://auditweb@db1:1521"})
    assert not bad.is_valid() and "SERVICE" in str(bad.errors["dsn"])
    monkeypatch.setenv("AUDITWEB_SOURCE_ORACLE_PASSWORD", "pw")
    run = ingest_source(source.pk)
    source.refresh_from_db()
    assert run.status == "failed"
    assert source.last_error.startswith("cannot connect to oracle://auditweb@127.0.0.1:9/ORCLPDB1: DPY-")


def test_a_quoted_oracle_table_has_its_page(investigator_client, ingest_bytes):
    ingest_bytes(to_json(ROWS), name="trail.json", server="ora1")
    response = investigator_client.get(reverse("table-detail", args=["Shop.Audit Copy"]))
    assert response.status_code == 200
    assert "DROP TABLE &quot;Shop&quot;.&quot;Audit Copy&quot; PURGE" in response.content.decode()
    merged = investigator_client.get(reverse("table-detail", args=["SHOP.STAGING"])).content.decode()
    assert "MERGE INTO shop.orders o USING shop.staging s" in merged  # the MERGE's source table too


def test_oracles_anti_forensic_statements_are_siem_alerts(api_client, ingest_bytes):
    from .test_api_alerts import poll_all

    ingest_bytes(to_xml(ROWS), name="ora_1_1.xml", server="ora-xml")
    ingest_bytes(to_csv(ROWS), name="trail.csv", server="ora-csv")
    alerts, _ = poll_all(api_client)
    off = sorted((a["server"], a["event"]["sql"]) for a in alerts if a["kind"] == "anti_forensic")
    clean = next(str(r["SQL_TEXT"]) for r in ROWS if "CLEAN_AUDIT_TRAIL" in str(r["SQL_TEXT"]))
    assert off == [
        ("ora-csv", clean),
        ("ora-csv", "DROP AUDIT POLICY shop_dml_pol"),
        ("ora-csv", "NOAUDIT POLICY shop_dml_pol"),
    ]  # (the XML trail has no unified policies: its sample holds none of these)
    destructive = {
        a["event"]["sql"] for a in alerts if a["server"] == "ora-xml" and a["kind"] == "destructive"
    }
    assert (
        "PURGE DBA_RECYCLEBIN" in destructive and "FLASHBACK TABLE shop.orders TO SCN 5000100" in destructive
    )
