"""Sessions: the list of connections, and one connection statement by statement."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from ingest.models import Event, Session
from investigations.views import sessions
from tests.investigations.logs import genlog

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


TRANSACTIONS = genlog(
    (at(0), 8, "Connect", "dora@10.1.1.1 on bank using TCP/IP"),
    (at(1), 8, "Query", "BEGIN"),
    (at(2), 8, "Query", "UPDATE accounts SET balance = 0 WHERE id = 1"),
    (at(3), 8, "Query", "ROLLBACK"),
    (at(4), 8, "Query", "START TRANSACTION"),
    (at(5), 8, "Query", "SELECT balance FROM accounts WHERE id = 2"),
    (at(6), 8, "Query", "DELETE FROM accounts WHERE id = 2"),
    (at(7), 8, "Query", "COMMIT"),
    (at(8), 8, "Quit", ""),
    (at(9), 9, "Connect", "reader@10.1.1.2 on bank using TCP/IP"),
    (at(10), 9, "Query", "SELECT count(*) FROM accounts"),
    (at(11), 42, "Query", "SELECT 'from a connection that began before the log'"),
)


def statements(html: str) -> list[tuple[str, str]]:
    """(row classes, statement) of a session table, in order."""
    body = html.split('<table class="events session">', 1)[1]
    rows = re.findall(r'<tr class="([^"]*)".*?<td class="sql">(.*?)</td>', body, re.S)
    return [(cls.strip(), re.sub(r"<[^>]+>", "", sql)) for cls, sql in rows]


def test_the_session_page_shows_who_when_and_every_statement_in_order(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(TRANSACTIONS, server="bank1")
    session = Session.objects.get(user="dora")
    html = investigator_client.get(f"/sessions/{session.pk}/?tz=UTC").content.decode()
    assert "Session of dora@10.1.1.1" in html
    assert "2026-01-05 09:00:00.000000 UTC" in html  # logged in
    assert "bank1" in html and '9, <strong class="danger-text">2 destructive</strong>' in html
    assert [sql for _, sql in statements(html)] == [
        "dora@10.1.1.1 on bank using TCP/IP", "BEGIN", "UPDATE accounts SET balance = 0 WHERE id = 1",
        "ROLLBACK", "START TRANSACTION", "SELECT balance FROM accounts WHERE id = 2",
        "DELETE FROM accounts WHERE id = 2", "COMMIT", "",
    ]  # fmt: skip


def test_transactions_are_bracketed_and_the_rolled_back_change_flagged(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(TRANSACTIONS, server="bank1")
    session = Session.objects.get(user="dora")
    rows = statements(investigator_client.get(f"/sessions/{session.pk}/").content.decode())
    classes = [cls for cls, _ in rows]
    assert classes == [
        "", "tx-begin", "destructive tx-inside", "tx-rollback",
        "tx-begin", "tx-inside", "destructive tx-inside", "tx-commit", "",
    ]  # fmt: skip
    html = investigator_client.get(f"/sessions/{session.pk}/").content.decode()
    update_row = html.split("UPDATE accounts SET balance = 0", 1)[1].split("</tr>", 1)[0]
    assert "rolled_back" in update_row


def test_a_long_session_is_paged_and_a_page_may_begin_inside_a_transaction(
    investigator_client, ingest_bytes, monkeypatch
) -> None:
    monkeypatch.setattr(sessions, "STATEMENTS_PAGE", 3)
    ingest_bytes(TRANSACTIONS, server="bank1")
    session = Session.objects.get(user="dora")
    first = investigator_client.get(f"/sessions/{session.pk}/").content.decode()
    assert len(statements(first)) == 3
    cursor = re.search(r'href="\?(cursor=[^"]+)">Later statements', first).group(1)
    second = investigator_client.get(f"/sessions/{session.pk}/?{cursor}").content.decode()
    assert statements(second)[0] == ("tx-rollback", "ROLLBACK")
    cursor = re.search(r'href="\?(cursor=[^"]+)">Later statements', second).group(1)
    third = investigator_client.get(f"/sessions/{session.pk}/?{cursor}").content.decode()
    assert statements(third)[0] == ("destructive tx-inside", "DELETE FROM accounts WHERE id = 2")


def test_a_session_that_began_before_the_log_is_unknown_never_guessed(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(TRANSACTIONS, server="bank1")
    event = Event.objects.get(connection_id=42)
    html = investigator_client.get(f"/sessions/{event.session_id}/").content.decode()
    assert 'Session of <span class="unknown">an unknown account</span>' in html
    assert "AuditWeb does not guess" in html


def test_the_sessions_list_counts_statements_and_finds_the_destructive_ones(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(TRANSACTIONS, server="bank1")
    html = investigator_client.get("/sessions/").content.decode()
    assert "dora@10.1.1.1" in html and "reader@10.1.1.2" in html
    dora = html.split("dora@10.1.1.1", 1)[1].split("</tr>", 1)[0]
    assert "<td>9</td>" in dora and '<span class="badge danger">2</span>' in dora
    destructive = investigator_client.get("/sessions/?destructive=true").content.decode()
    assert "dora@10.1.1.1" in destructive and "reader@10.1.1.2" not in destructive
    assert "reader@10.1.1.2" in investigator_client.get("/sessions/?user=reader").content.decode()


def test_the_sessions_list_says_what_to_do_when_empty(investigator_client) -> None:
    assert "No sessions yet" in investigator_client.get("/sessions/").content.decode()


def test_an_unknown_session_is_not_found(investigator_client) -> None:
    assert investigator_client.get("/sessions/12345/").status_code == 404


def test_a_mariadb_sessions_login_and_end_are_shown_to_the_second_its_log_wrote(
    investigator_client, ingest_bytes
) -> None:
    log = (
        b"/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-log (MariaDB Server). started with:\n"
        b"Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\n"
        b"Time\t\t    Id Command\tArgument\n"
        b"260105  9:00:00\t     8 Connect\tdora@10.1.1.1 on bank using TCP/IP\n"
        b"\t\t     8 Query\tDELETE FROM accounts WHERE id = 2\n"
        b"260105  9:00:07\t     8 Quit\t\n"
    )
    ingest_bytes(log, server="maria1")
    session = Session.objects.get(user="dora")
    html = investigator_client.get(f"/sessions/{session.pk}/?tz=UTC").content.decode()
    assert ">2026-01-05 09:00:00 UTC</time>" in html and ">2026-01-05 09:00:07 UTC</time>" in html
    assert "09:00:00.000000 UTC</time>" not in html  # the log has seconds: no invented microseconds
