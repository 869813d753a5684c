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


def deletes_from_orders(api_client) -> list[tuple[object, ...]]:
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


def test_an_rfc5424_feed_names_who_deleted_with_the_receivers_microseconds(api_client) -> None:
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
    events = [(e.line, e.byte_offset, e.raw) for e in Event.objects.order_by("byte_offset")]
    assert len(events) == len(lines) == 106
    for line, offset, raw in events:
        assert bytes(raw) == lines[line - 1] == data[offset : offset + len(raw)]
    assert not ParseProblem.objects.exists()


def test_rfc3164_as_syslog3_sends_it_takes_the_year_of_the_files_mtime(api_client, tmp_path) -> None:
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


def test_broken_headers_between_real_messages_are_stored_problems_and_the_rest_is_read(tmp_path) -> None:
    lines = RFC5424.read_bytes().splitlines(keepends=True)
    bogus = [
        lines[10].replace(b"<14>", b"<abc>", 1),  # no PRI: no record
        lines[11][:40] + b"\n",  # a header cut short
        b"<14>1 " + b"[" * 2_000_000 + b"\n",  # structured data that never ends
    ]
    odd = lines[12].replace(b"<14>", b"<999>", 1)  # a PRI past 191: read, and noted
    data = b"".join(lines[:10] + bogus + [odd] + lines[13:])
    path = tmp_path / "hostile-syslog.log"
    path.write_bytes(data)
    summary = ingest(path)
    assert "104 events stored" in summary and ", 2 problems," in summary
    problems = list(ParseProblem.objects.order_by("offset").values_list("line", "offset", "reason"))
    first = sum(map(len, lines[:10]))
    assert problems == [
        (
            11,
            first,
            f"not a server_audit record: 3 lines, {sum(map(len, bogus))} bytes (the first 2048 kept here)",
        ),
        (
            14,
            first + sum(map(len, bogus)),
            "invalid syslog priority <999> (at most 191): facility and severity unknown",
        ),
    ]
    noted = Event.objects.get(line=14)
    assert bytes(noted.raw) == odd and noted.user == "audit_admin"
