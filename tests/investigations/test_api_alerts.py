"""The alerts feed a SIEM polls: every alert once, in order, even when transactions commit out of order."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from ingest.follow import ingest_source
from ingest.models import Alert, Event, Source
from ingest.sources import check_sources_health
from tests.logwriter import GeneralLogWriter

from ..conftest import FIXTURES

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"

pytestmark = pytest.mark.django_db(transaction=True)


def second_connection() -> psycopg.Connection:
    """Another client of the test database, with a transaction of its own."""
    s = connection.settings_dict
    host = s["HOST"] or s.get("OPTIONS", {}).get("host")  # (a socket folder: DATABASE_URL's ?host=/dir)
    return psycopg.connect(
        dbname=s["NAME"], user=s["USER"], password=s["PASSWORD"], host=host, port=s["PORT"] or None
    )


def poll(api_client, after: str | None = None, page_size: int = 100) -> dict:
    params = {"page_size": page_size} | ({"after": after} if after else {})
    response = api_client.get("/api/v1/alerts/", params)
    assert response.status_code == 200, response.content
    return response.json()


def poll_all(api_client, after: str | None = None, page_size: int = 100) -> tuple[list[dict], str | None]:
    """What a SIEM does: ask after its cursor until nothing more is ready; keep the last cursor."""
    seen: list[dict] = []
    while True:
        page = poll(api_client, after, page_size)
        seen += page["results"]
        after = page["cursor"]
        if page["next"] is None:
            return seen, after


def test_each_destructive_anti_forensic_and_privilege_event_raises_one_alert(
    api_client, ingest_bytes
) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    alerts, _ = poll_all(api_client, page_size=3)
    worth = Event.objects.filter(
        Q(destructive=True) | Q(flags__overlap=["anti_forensic", "privilege_change"])
    )
    assert sorted(a["event"]["id"] for a in alerts) == sorted(worth.values_list("id", flat=True))
    assert len(alerts) >= 5
    by_sql = {a["event"]["sql"]: a for a in alerts}
    assert by_sql["DELETE FROM orders"]["kind"] == "destructive"
    assert by_sql["DELETE FROM orders"]["event"]["user"] == "bob"
    assert by_sql["DELETE FROM orders"]["server"] == "shop-db"
    off = [a for a in alerts if a["kind"] == "anti_forensic"]
    assert [a["event"]["sql"] for a in off] == ["SET GLOBAL general_log = OFF"]
    assert {a["kind"] for a in alerts if "GRANT" in a["event"]["sql"]} == {"privilege_change"}
    # In the order they were stored: the log's order, within one ingest.
    assert [a["event"]["id"] for a in alerts] == sorted(a["event"]["id"] for a in alerts)


def test_reading_the_same_log_again_raises_nothing_new(api_client, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    first, cursor = poll_all(api_client)
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db", name="copy-of-general.log")
    assert Alert.objects.count() == len(first)
    again, _ = poll_all(api_client, cursor)
    assert again == []


def test_a_poller_sees_every_alert_once_when_transactions_commit_out_of_order(
    api_client, ingest_bytes
) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    before, cursor = poll_all(api_client)
    # A writer raises an alert first, and its transaction goes on (an ingest batch not committed).
    slow = second_connection()
    slow.execute(
        "INSERT INTO ingest_alert (kind, server, created_at, reason)"
        " VALUES ('source_health', 'slow', now(), '')"
    )
    # Another writer raises one meanwhile, in a transaction that would commit at once.
    fast = threading.Thread(target=raise_alert, args=("fast",))
    fast.start()
    fast.join(timeout=1)
    assert fast.is_alive()  # it waits for its turn: the slow one must become visible first
    waiting, cursor_while = poll_all(api_client, cursor)
    assert waiting == [] and cursor_while == cursor
    slow.commit()
    fast.join(timeout=10)
    assert not fast.is_alive()
    after, _ = poll_all(api_client, cursor)
    assert [a["server"] for a in after] == ["slow", "fast"]
    assert len(before) + len(after) == Alert.objects.count()


def raise_alert(server: str) -> None:
    try:
        Alert.objects.create(kind=Alert.Kind.SOURCE_HEALTH, server=server)
    finally:
        connection.close()  # this thread's own connection


def test_a_rolled_back_writer_leaves_no_alert_and_holds_up_nobody_after(api_client) -> None:
    aborted = second_connection()
    aborted.execute(
        "INSERT INTO ingest_alert (kind, server, created_at, reason) VALUES ('source_health', 'x', now(), '')"
    )
    kept = threading.Thread(target=raise_alert, args=("kept",))
    kept.start()
    aborted.rollback()
    aborted.close()
    kept.join(timeout=10)
    assert [a["server"] for a in poll_all(api_client)[0]] == ["kept"]


def test_an_alert_knows_its_position_as_soon_as_it_is_created() -> None:
    first = Alert.objects.create(kind=Alert.Kind.SOURCE_HEALTH, server="a")
    second = Alert.objects.create(kind=Alert.Kind.SOURCE_HEALTH, server="b")
    assert 0 < first.position < second.position
    assert Alert.objects.get(pk=first.pk).position == first.position


def test_pages_follow_one_another_and_the_last_cursor_is_kept(api_client) -> None:
    for n in range(7):
        Alert.objects.create(kind=Alert.Kind.SOURCE_HEALTH, server=f"s{n}")
    page = poll(api_client, page_size=3)
    assert [a["server"] for a in page["results"]] == ["s0", "s1", "s2"]
    assert page["next"] is not None and page["cursor"] == page["results"][-1]["cursor"]
    seen, last = poll_all(api_client, page["cursor"], page_size=3)
    assert [a["server"] for a in seen] == ["s3", "s4", "s5", "s6"]
    assert poll(api_client, last) == {"next": None, "cursor": last, "results": []}


def test_a_cursor_it_never_gave_is_refused(api_client) -> None:
    response = api_client.get("/api/v1/alerts/", {"after": "not-a-cursor"})
    assert response.status_code == 400
    assert "after" in response.json()


def test_the_feed_needs_a_token(client) -> None:
    assert client.get("/api/v1/alerts/").status_code in (401, 403)


def test_a_source_that_vanishes_or_falls_silent_raises_one_alert_until_it_recovers(
    api_client, tmp_path: Path
) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(20)
    source = Source.objects.create(name="db1-log", path=str(log), server="db1", quiet_seconds=60)
    ingest_source(source.pk)
    health = Alert.objects.filter(kind=Alert.Kind.SOURCE_HEALTH)
    assert health.count() == 0  # healthy: nothing to say
    moved = log.rename(tmp_path / "elsewhere")
    assert check_sources_health() == 1
    assert check_sources_health() == 0  # the same trouble: one alert
    moved.rename(log)
    writer.write(5)
    ingest_source(source.pk)  # reads again: healthy
    Source.objects.filter(pk=source.pk).update(last_data_at=timezone.now() - timedelta(minutes=10))
    check_sources_health()
    check_sources_health()
    alerts = [a for a in poll_all(api_client)[0] if a["kind"] == "source_health"]
    assert [(a["kind"], a["server"], a["source"]["name"]) for a in alerts] == [
        ("source_health", "db1", "db1-log")
    ] * 3
    assert alerts[0]["reason"] == f"the file vanished: nothing matches {log}"
    assert alerts[1]["reason"] == "healthy again"
    assert alerts[2]["reason"].startswith("no data for 10 min")
    assert alerts[0]["event"] is None
    assert all(a["occurred_at"] and a["created_at"] for a in alerts)


def test_events_stored_in_a_batch_that_was_partly_stored_before_raise_only_their_own_alerts(
    api_client, ingest_bytes
) -> None:
    """A file read again after it grew: the writer's slow path stores (and alerts) the new events only."""
    lines = SCENARIO.read_bytes().splitlines(keepends=True)
    half = len(lines) * 2 // 3
    ingest_bytes(b"".join(lines[:half]), server="shop-db")
    first = Alert.objects.count()
    ingest_bytes(b"".join(lines), server="shop-db")
    alerts, _ = poll_all(api_client)
    worth = Event.objects.filter(
        Q(destructive=True) | Q(flags__overlap=["anti_forensic", "privilege_change"])
    )
    assert sorted(a["event"]["id"] for a in alerts) == sorted(worth.values_list("id", flat=True))
    assert len(alerts) > first > 0


def test_each_alert_carries_its_event_as_the_events_api_shows_it(api_client, ingest_bytes) -> None:
    from investigations.api.events import EventSerializer

    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    alerts, _ = poll_all(api_client)
    assert len(alerts) > 5
    for alert in alerts:
        event = Event.objects.select_related("session", "source_file").get(pk=alert["event"]["id"])
        assert alert["event"] == EventSerializer(event).data  # every field, the same values
        assert (alert["server"], alert["occurred_at"]) == (event.server, alert["event"]["occurred_at"])


def test_the_feeds_alerts_are_what_the_documented_serializer_says(api_client, ingest_bytes, tmp_path) -> None:
    from ingest.alerts import alerts_after
    from investigations.api.alerts import AlertSerializer

    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    source = Source.objects.create(
        name="gone", kind="file", path=str(tmp_path / "nothing*.log"), server="db9"
    )
    check_sources_health()  # a source whose files vanished: a health alert among the event alerts
    assert Alert.objects.filter(kind=Alert.Kind.SOURCE_HEALTH, source=source).exists()
    alerts, _ = poll_all(api_client)
    documented = AlertSerializer(alerts_after(None, 1000).items, many=True).data
    assert alerts == documented  # every alert, every field (the events too), in order
