"""A session's page shows when it logged in and ended to the precision its log wrote them with,
as the event page does; lists and small mentions of an event's time show it to the second."""

from __future__ import annotations

import re
from datetime import UTC

import pytest

from ingest.models import Event, Session
from tests.conftest import FIXTURES
from tests.investigations.logs import SCENARIO

pytestmark = pytest.mark.django_db
# The CSV engine's file of mysql.general_log (the table's own rows: event_time has microseconds).
TABLE_CSV = FIXTURES / "crime_scene" / "mariadb-10.11.19-general_log-1.CSV"


def fact(client, session: Session, name: str) -> str:
    """The text a reader sees for one fact of the session's page (in UTC)."""
    html = client.get(f"/sessions/{session.pk}/?tz=UTC").content.decode()
    found = re.search(rf"<dt>{name}</dt><dd>(.*?)</dd>", html, re.S)
    assert found, f"no {name} on the page"
    return re.sub(r"<[^>]+>", " ", found.group(1))


def utc(when) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def test_a_general_log_of_seconds_shows_login_and_end_to_the_second(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    session = Session.objects.filter(started_at__isnull=False, ended_at__isnull=False).order_by("pk").first()
    logged_in, ended = (
        fact(investigator_client, session, "Logged in"),
        fact(investigator_client, session, "Ended"),
    )
    assert utc(session.started_at) + " UTC" in logged_in
    assert utc(session.ended_at) + " UTC" in ended
    assert "." not in logged_in + ended  # no .000000 the log never wrote


def test_the_general_log_table_shows_login_and_end_to_the_microsecond(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(TABLE_CSV.read_bytes(), name="general_log.CSV", server="db1", fmt="general-log-csv")
    session = Session.objects.get(user="dave", connection_id=404)
    logged_in, ended = (
        fact(investigator_client, session, "Logged in"),
        fact(investigator_client, session, "Ended"),
    )
    assert "2026-11-23 12:48:31.300835 UTC" in logged_in  # its Connect row, as the table has it
    assert session.ended_at is not None and session.ended_at.microsecond
    assert f"{utc(session.ended_at)}.{session.ended_at.microsecond:06d} UTC" in ended


def test_a_session_whose_login_the_log_does_not_hold_says_so(investigator_client, ingest_bytes) -> None:
    ingest_bytes(b"2026-01-05T09:00:03Z\t   31 Query\tDELETE FROM t\n", server="db1")
    session = Session.objects.get()
    assert "not in the logs read" in fact(investigator_client, session, "Logged in")


def test_the_pin_page_shows_the_events_time_as_lists_do(investigator_client, ingest_bytes) -> None:
    ingest_bytes(TABLE_CSV.read_bytes(), name="general_log.CSV", server="db1", fmt="general-log-csv")
    event = Event.objects.filter(statement_type="DELETE").order_by("id").first()
    page = investigator_client.get(f"/cases/pin/?event={event.pk}&tz=UTC").content.decode()
    assert f'<time datetime="{event.occurred_at.astimezone(UTC):%Y-%m-%dT%H:%M:%S.%fZ}"' in page
    assert f">{utc(event.occurred_at)}</time>" in page
