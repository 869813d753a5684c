"""server_audit as a syslog receiver gets it, ingested with `--format auto` and asked who deleted.

The fixtures of tests/fixtures/server_audit_syslog/ were written by the real MariaDB here
through a real rsyslog (regenerate.py there): the same 106 messages in four forms.
"""

from __future__ import annotations

import io
import os
import shutil
from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from ingest.models import Event, ParseProblem

from .conftest import FIXTURES

SYSLOG = FIXTURES / "server_audit_syslog"
RFC5424 = SYSLOG / "mariadb-10.11.19-syslog-rfc5424.log"
NOHOST = SYSLOG / "mariadb-10.11.19-syslog-rfc3164-nohost.log"

pytestmark = pytest.mark.django_db(transaction=True)


def ingest(path: object) -> str:
    out = io.StringIO()
    call_command("ingest", str(path), "--server", "shop-db", stdout=out)  # --format auto
    return out.getvalue()


def deletes_from_orders(api_client) -> list[tuple[object, ...]]:  # type: ignore[no-untyped-def]
    response = api_client.get("/api/v1/events/", {"table": "auditshop.orders", "destructive": "true"})
    return [
        (
            r["user"],
            r["host"],
            r["connection_id"],
            r["occurred_at"],
            r["sql"],
            r["status"],
            r["source"]["line"],
        )
        for r in response.json()["results"]
    ]


def test_an_rfc5424_feed_names_who_deleted_with_the_receivers_microseconds(api_client) -> None:  # type: ignore[no-untyped-def]
    summary = ingest(RFC5424)
    assert "106 events stored" in summary and ", 0 problems," in summary
    assert deletes_from_orders(api_client) == [
        ("audit_bob", "127.0.0.1", 74, "2026-11-24T20:06:44.129246Z", "DELETE FROM orders", "ok", 67),
        (
            "audit_bob",
            "127.0.0.1",
            74,
            "2026-11-24T20:06:44.128602Z",
            "DELETE FROM orders WHERE id = 3",
            "ok",
            65,
        ),
    ]


def test_every_event_is_its_line_of_the_file_at_its_offset() -> None:
    ingest(RFC5424)
    data = RFC5424.read_bytes()
    lines = data.splitlines(keepends=True)
    events = list(Event.objects.order_by("byte_offset").values_list("line", "byte_offset", "raw"))
    assert len(events) == len(lines) == 106
    for line, offset, raw in events:
        assert bytes(raw) == lines[line - 1] == data[offset : offset + len(raw)]
    assert not ParseProblem.objects.exists()


def test_rfc3164_as_syslog3_sends_it_takes_the_year_of_the_files_mtime(api_client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "audit-syslog.log"
    shutil.copyfile(NOHOST, path)
    written = datetime(2026, 11, 24, 20, 7, tzinfo=UTC).timestamp()
    os.utime(path, (written, written))
    summary = ingest(path)
    assert "106 events stored" in summary and ", 0 problems," in summary
    assert deletes_from_orders(api_client) == [
        ("audit_bob", "127.0.0.1", 74, "2026-11-24T20:06:44.000000Z", "DELETE FROM orders", "ok", 67),
        (
            "audit_bob",
            "127.0.0.1",
            74,
            "2026-11-24T20:06:44.000000Z",
            "DELETE FROM orders WHERE id = 3",
            "ok",
            65,
        ),
    ]
    # The failed logins and the DELETE cut by server_audit_query_log_limit are there too.
    refused = api_client.get("/api/v1/events/", {"flag": "failed"}).json()["results"]
    assert {(r["user"], r["status"]) for r in refused if r["command"] == "Connect"} == {
        ("audit_mallory", "denied"),
        ("audit_alice", "denied"),
    }
    cut = Event.objects.get(line=103)
    assert (cut.user, cut.statement_type, cut.tables) == ("audit_admin", "DELETE", ["auditshop.clients"])


def test_ingesting_a_syslog_feed_again_stores_nothing_new() -> None:
    ingest(RFC5424)
    assert "0 events stored (106 already there)" in ingest(RFC5424)
