"""The case records: a pin keeps the event as it was, once per case; notes are signed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ingest.models import Event
from investigations.cases import (
    AlreadyPinned,
    CaseClosed,
    case_create,
    case_set_status,
    evidence_pin,
    note_add,
)
from investigations.models import Case, Evidence
from tests.investigations.logs import genlog

pytestmark = pytest.mark.django_db

T = datetime(2026, 3, 4, 22, 15, tzinfo=UTC)


@pytest.fixture
def delete_event(ingest_bytes):
    ingest_bytes(
        genlog(
            (T, 7, "Connect", "bob@10.0.0.9 on shop using TCP/IP"),
            (T, 7, "Query", "DELETE FROM orders WHERE id < 100"),
        )
    )
    return Event.objects.get(statement_type="DELETE")


def test_it_keeps_the_events_time_and_record_hash_on_the_pin(investigator, delete_event):
    case = case_create(user=investigator, title="Orders vanished")
    pin = evidence_pin(case=case, event=delete_event, user=investigator, note="the culprit")

    stored = Evidence.objects.get(pk=pin.pk)
    assert stored.event_id == delete_event.pk
    assert stored.event_occurred_at == delete_event.occurred_at
    assert bytes(stored.event_record_hash) == bytes(delete_event.record_hash)
    assert stored.event.sql == "DELETE FROM orders WHERE id < 100"
    assert list(case.investigators.all()) == [investigator]


def test_it_pins_an_event_once_per_case(investigator, delete_event):
    case = case_create(user=investigator, title="Orders vanished")
    evidence_pin(case=case, event=delete_event, user=investigator)
    with pytest.raises(AlreadyPinned):
        evidence_pin(case=case, event=delete_event, user=investigator)
    other = case_create(user=investigator, title="Another look")
    evidence_pin(case=other, event=delete_event, user=investigator)
    assert Evidence.objects.filter(event_id=delete_event.pk).count() == 2


def test_a_closed_case_takes_no_pins_or_notes_until_reopened(investigator, delete_event):
    case = case_create(user=investigator, title="Orders vanished")
    case_set_status(case=case, status=Case.Status.CLOSED)
    assert Case.objects.get(pk=case.pk).closed_at is not None
    with pytest.raises(CaseClosed):
        evidence_pin(case=case, event=delete_event, user=investigator)
    with pytest.raises(CaseClosed):
        note_add(case=case, user=investigator, text="late")
    case_set_status(case=case, status=Case.Status.OPEN)
    note = note_add(case=case, user=investigator, text="reopened: bob's DELETE")
    assert note.author == investigator and note.created_at is not None
