"""Migration 0027 (issue 22, item 3) drops the unique index on every event's record hash, names
each alert's event by id, and records what each file holds; backward, the index comes back.
Tested on a populated store."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.utils import IntegrityError

from ingest.models import Alert, Event, SourceFile

from ..conftest import FIXTURES
from .test_narrow_row_migration import migrate

pytestmark = pytest.mark.django_db(transaction=True)

CRIME_SCENE = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"
BEFORE = [("ingest", "0026_narrow_event_row")]


def indexes() -> set[str]:
    with connection.cursor() as cur:
        cur.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'ingest_event_row'")
        return {row[0] for row in cur.fetchall()}


def alerts_by_key() -> list[tuple[object, ...]]:
    with connection.cursor() as cur:
        cur.execute("SELECT position, event_time, event_hash FROM ingest_alert ORDER BY position")
        return [(p, t, bytes(h) if h is not None else None) for p, t, h in cur.fetchall()]


def test_a_populated_store_goes_back_and_forth(ingest_bytes) -> None:
    run = ingest_bytes(CRIME_SCENE.read_bytes(), server="db1")
    assert run.events_stored > 100
    ids = dict(Alert.objects.exclude(event_id=None).values_list("position", "event_id"))
    assert len(ids) > 10
    keys = alerts_by_key()
    size = SourceFile.objects.get().bytes_read

    migrate(BEFORE)
    assert "event_record_once" in indexes() and "event_time_order" not in indexes()
    assert alerts_by_key() == keys  # the alerts as they were, named by time and hash
    with connection.cursor() as cur:
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'ingest_alert'")
        assert "event_id" not in {row[0] for row in cur.fetchall()}

    migrate()
    assert "event_record_once" not in indexes() and "event_time_order" in indexes()
    # Each alert names its event by id again, the same one.
    assert dict(Alert.objects.exclude(event_id=None).values_list("position", "event_id")) == ids
    for alert in Alert.objects.exclude(event_id=None):
        event = Event.objects.get(pk=alert.event_id)
        assert (event.occurred_at, bytes(event.record_hash)) == (alert.event_time, bytes(alert.event_hash))
    # A file read to its end holds every event it has: read again, it stores nothing.
    assert SourceFile.objects.get().stored_below == size
    assert ingest_bytes(CRIME_SCENE.read_bytes(), server="db1").events_stored == 0


def test_going_back_over_a_store_holding_a_record_twice_says_so(ingest_bytes) -> None:
    ingest_bytes(CRIME_SCENE.read_bytes(), server="db1")
    with connection.cursor() as cur:  # exactly once broken (by hand): the index cannot come back
        cur.execute(
            "INSERT INTO ingest_event_row OVERRIDING SYSTEM VALUE"
            " SELECT * FROM ingest_event_row ORDER BY id LIMIT 1"
        )
    with pytest.raises(IntegrityError):
        migrate(BEFORE)
    migrate()
