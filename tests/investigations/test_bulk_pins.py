"""Pinning several events at once: the ticked rows of the explorer, a session or a table's history;
a new case from the explorer's search; the bulk pin of the API; the pinned marks on every page
that lists events. Each pin keeps the event's time and record hash, as a single pin does."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from ingest.models import Event
from investigations.cases import MAX_PINS_PER_REQUEST, case_create, case_set_status, evidence_pin
from investigations.models import Case, CaseNote, Evidence, SavedFilter
from investigations.trail import AuditRecord
from tests.investigations.cases_data import CULPRIT_SQL

pytestmark = pytest.mark.django_db


@pytest.fixture
def bobs(events):
    """bob's statements, oldest first (connect, select, delete, drop)."""
    return list(events.filter(user="bob").order_by("occurred_at", "id"))


def pin_selected(client, ids, case, **extra):
    return client.post(reverse("pin-selected"), {"event": ids, "case": case, **extra}, HTTP_HX_REQUEST="true")


def pinned_events(case: Case) -> list[int]:
    return sorted(Evidence.objects.filter(case=case).values_list("event_id", flat=True))


def test_it_pins_the_ticked_events_each_as_a_single_pin_keeps_it(investigator_client, investigator, bobs):
    case = case_create(user=investigator, title="The orders")
    ids = [e.pk for e in bobs]
    answer = pin_selected(investigator_client, ids, case.pk, note="bob's session")
    page = answer.content.decode()
    assert answer.status_code == 200 and f"Pinned {len(ids)} events to" in page
    assert pinned_events(case) == sorted(ids)
    for event in bobs:
        pin = Evidence.objects.get(case=case, event=event)
        assert bytes(pin.event_record_hash) == bytes(event.record_hash)
        assert (pin.event_occurred_at, pin.note, pin.pinned_by) == (
            event.occurred_at,
            "bob's session",
            investigator,
        )
        # each event's marks come back to replace the row's in place
        assert f'id="pins-{event.pk}" hx-swap-oob="true"' in page
    assert page.count(f"pinned #{case.pk}") == len(ids)
    audited = AuditRecord.objects.filter(action="case_change", details__what="pin", details__case=case.pk)
    assert sorted(i for r in audited for i in r.details.get("events", [])) == sorted(ids)


def test_the_pins_of_a_bulk_pin_verify_against_the_custody_chain(investigator_client, investigator, bobs):
    case = case_create(user=investigator, title="The orders")
    pin_selected(investigator_client, [e.pk for e in bobs], case.pk)
    out = StringIO()
    call_command("verify_evidence", "--case", str(case.pk), stdout=out)
    assert f"the {len(bobs)} event(s) pinned to case #{case.pk}" in out.getvalue()
    Event.objects.filter(pk=bobs[2].pk).update(record_hash=b"\x00" * 16)
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("verify_evidence", "--case", str(case.pk), stdout=out)
    assert (
        f"1 event(s) pinned to case #{case.pk} 'The orders' differ from when they were pinned"
        in out.getvalue()
    )


def test_events_already_in_the_case_are_left_as_they_were(investigator_client, investigator, bobs):
    case = case_create(user=investigator, title="The orders")
    first = evidence_pin(case=case, event=bobs[2], user=investigator, note="the DELETE")
    answer = pin_selected(investigator_client, [bobs[1].pk, bobs[2].pk, bobs[2].pk], case.pk, note="again")
    assert "Pinned 1 event to" in answer.content.decode() and "1 was in it already" in answer.content.decode()
    assert pinned_events(case) == sorted([bobs[1].pk, bobs[2].pk])
    kept = Evidence.objects.get(case=case, event=bobs[2])
    assert (kept.pk, kept.note, kept.pinned_at) == (first.pk, "the DELETE", first.pinned_at)
    again = pin_selected(investigator_client, [bobs[1].pk, bobs[2].pk], case.pk)
    assert "Pinned 0 events" in again.content.decode() and Evidence.objects.filter(case=case).count() == 2


def test_a_selection_pins_into_a_new_case_named_in_the_bar(investigator_client, investigator, bobs):
    ids = [bobs[2].pk, bobs[3].pk]
    nameless = pin_selected(investigator_client, ids, "new", title="  ")
    assert "Name the new case." in nameless.content.decode() and not Case.objects.exists()
    answer = pin_selected(investigator_client, ids, "new", title="Wiped orders").content.decode()
    case = Case.objects.get(title="Wiped orders")
    assert pinned_events(case) == sorted(ids) and list(case.investigators.all()) == [investigator]
    # the bar now offers the new case, chosen, for the next pins
    assert 'id="sel-case" name="case" hx-swap-oob="true"' in answer
    assert f'<option value="{case.pk}" selected>#{case.pk} Wiped orders</option>' in answer


def test_it_refuses_more_than_the_limit_and_pins_none(investigator_client, investigator, bobs):
    case = case_create(user=investigator, title="The orders")
    too_many = [bobs[0].pk, *range(10**9, 10**9 + MAX_PINS_PER_REQUEST)]
    answer = pin_selected(investigator_client, too_many, case.pk)
    text = answer.content.decode()
    assert f"{MAX_PINS_PER_REQUEST + 1} events are ticked: at most {MAX_PINS_PER_REQUEST}" in text
    assert not Evidence.objects.exists()
    nothing = investigator_client.post(reverse("pin-selected"), {"case": case.pk})
    assert nothing.status_code == 400 and "Tick the events to pin first." in nothing.content.decode()
    junk = pin_selected(investigator_client, ["1 OR 1=1"], case.pk)
    assert "whole numbers" in junk.content.decode() and not Evidence.objects.exists()


def test_ids_of_no_stored_event_are_said_not_pinned(investigator_client, investigator, bobs):
    case = case_create(user=investigator, title="The orders")
    answer = pin_selected(investigator_client, [bobs[2].pk, 987654321], case.pk)
    assert "1 is no longer in the store" in answer.content.decode()
    assert pinned_events(case) == [bobs[2].pk]


def test_it_rejects_viewer(client, viewer, investigator, bobs):
    case = case_create(user=investigator, title="The orders")
    client.force_login(viewer)
    assert pin_selected(client, [bobs[2].pk], case.pk).status_code == 403
    assert client.get(reverse("case-from-search") + "?user=bob").status_code == 403
    assert client.post(reverse("case-from-search") + "?user=bob", {"title": "x"}).status_code == 403
    assert not Evidence.objects.exists() and Case.objects.count() == 1
    explorer = client.get(reverse("events") + "?user=bob").content.decode()
    assert 'form="pin-selected"' not in explorer and "New case from this search" not in explorer


def test_it_refuses_a_case_the_user_does_not_work_on_or_that_is_closed(
    investigator_client, investigator, django_user_model, bobs
):
    other = django_user_model.objects.create_user("olga")
    theirs = case_create(user=other, title="Not yours")
    answer = pin_selected(investigator_client, [bobs[2].pk], theirs.pk)
    assert "Select a valid choice" in answer.content.decode() and not Evidence.objects.exists()
    closed = case_create(user=investigator, title="Done with")
    case_set_status(case=closed, status=Case.Status.CLOSED)
    assert (
        "Select a valid choice" in pin_selected(investigator_client, [bobs[2].pk], closed.pk).content.decode()
    )
    assert not Evidence.objects.exists()


def test_a_pin_without_the_csrf_token_is_refused(investigator, investigator_client, bobs):
    case = case_create(user=investigator, title="The orders")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(investigator)
    answer = strict.post(reverse("pin-selected"), {"event": [bobs[2].pk], "case": case.pk})
    assert answer.status_code == 403 and not Evidence.objects.exists()
    page = strict.get(reverse("events") + "?user=bob")
    token = page.cookies["csrftoken"].value
    ok = strict.post(reverse("pin-selected"), {"event": [bobs[2].pk], "case": case.pk},
                     HTTP_X_CSRFTOKEN=token)  # fmt: skip
    assert ok.status_code == 302 and pinned_events(case) == [bobs[2].pk]


def test_without_javascript_the_bar_goes_back_to_the_page_it_was_on(investigator_client, investigator, bobs):
    case = case_create(user=investigator, title="The orders")
    back = reverse("session-detail", args=[bobs[2].session_id])
    answer = investigator_client.post(
        reverse("pin-selected"), {"event": [bobs[2].pk], "case": case.pk, "next": back}
    )
    assert answer.status_code == 302 and answer["Location"] == back
    page = investigator_client.get(back).content.decode()
    assert f"Pinned 1 event(s) to case #{case.pk} The orders." in page
    away = investigator_client.post(
        reverse("pin-selected"), {"event": [bobs[3].pk], "case": case.pk, "next": "//evil.example/"}
    )
    assert away["Location"] == reverse("events")


def test_every_page_listing_events_offers_ticking_and_shows_the_pinned_state(
    investigator_client, investigator, bobs
):
    culprit = next(e for e in bobs if e.sql == CULPRIT_SQL)
    case = case_create(user=investigator, title="The orders")
    other = case_create(user=investigator, title="Second look")
    evidence_pin(case=case, event=culprit, user=investigator)
    evidence_pin(case=other, event=culprit, user=investigator)
    mark = f'<a class="pin-mark" href="{reverse("case-detail", args=[case.pk])}#evidence"'
    ticked = f'<input type="checkbox" name="event" value="{culprit.pk}" form="pin-selected"'
    selectable = [
        reverse("events") + "?user=bob",
        reverse("session-detail", args=[culprit.session_id]),
        reverse("table-detail", args=["shop.orders"]),
    ]
    for url in selectable:
        page = investigator_client.get(url).content.decode()
        assert mark in page and f"pinned #{other.pk}" in page, url
        assert ticked in page and 'id="pin-selected"' in page and "select-all" in page, url
        assert page.count(f'id="pins-{culprit.pk}"') == 1, url
    detail = investigator_client.get(reverse("event-detail", args=[culprit.pk])).content.decode()
    assert mark in detail and ticked not in detail  # no bar there: one event, one pin button
    dashboard = investigator_client.get(reverse("dashboard")).content.decode()
    assert mark in dashboard and f'id="pins-{culprit.pk}"' not in dashboard  # listed twice there: no id
    unpinned = investigator_client.get(reverse("event-detail", args=[bobs[0].pk])).content.decode()
    assert f'<span class="pin-marks" id="pins-{bobs[0].pk}"></span>' in unpinned


def test_the_single_pin_answer_marks_the_row_in_place(investigator_client, investigator, bobs):
    case = case_create(user=investigator, title="The orders")
    answer = investigator_client.post(
        reverse("pin"), {"event": bobs[2].pk, "case": case.pk}, HTTP_HX_REQUEST="true"
    )
    page = answer.content.decode()
    assert "data-pinned-ok" in page and f'id="pins-{bobs[2].pk}" hx-swap-oob="true"' in page
    assert f"pinned #{case.pk}" in page and "bar-cases" not in page
    made = investigator_client.post(
        reverse("pin"), {"event": bobs[3].pk, "case": "new", "title": "Second"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    second = Case.objects.get(title="Second")
    # the page's "pin selected" bar is handed the new case, chosen, for the next pins
    assert '<template class="bar-cases">' in made
    assert f'<option value="{second.pk}" selected>#{second.pk} Second</option>' in made


# -- a new case from the explorer's search ------------------------------------------------


def test_a_new_case_from_a_search_shows_the_count_first_then_pins_every_match(
    investigator_client, investigator, events
):
    query = "user=bob&destructive=true&tz=UTC"
    url = reverse("case-from-search") + "?" + query
    matching = sorted(events.filter(user="bob", destructive=True).values_list("pk", flat=True))
    form = investigator_client.get(url).content.decode()
    assert f"<strong>{len(matching)}</strong>" in form and f"pin {len(matching)} events" in form
    assert not Case.objects.exists()  # looking creates nothing
    looked = AuditRecord.objects.get(action="search", details__where="new case from a search")
    assert looked.details["count"] == len(matching) and looked.details["filters"]["user"] == "bob"
    answer = investigator_client.post(url, {"title": "bob's damage", "description": "from the search"})
    case = Case.objects.get(title="bob's damage")
    assert answer.status_code == 302 and answer["Location"] == reverse("case-detail", args=[case.pk])
    assert pinned_events(case) == matching
    assert SavedFilter.objects.get(case=case).query == query
    note = CaseNote.objects.get(case=case).text
    assert f"{len(matching)} events matched, {len(matching)} pinned" in note
    made = AuditRecord.objects.get(action="case_create", details__case=case.pk)
    assert made.details["from_search"] == query and made.details["matching"] == len(matching)
    explorer = investigator_client.get(reverse("events") + "?" + query).content.decode()
    assert f'href="{reverse("case-from-search")}?user=bob&amp;destructive=true&amp;tz=UTC"' in explorer


def test_a_search_over_the_limit_is_refused_with_its_count(investigator_client, events, settings):
    settings.CASE_FROM_SEARCH_MAX = 2
    url = reverse("case-from-search") + "?user=bob"
    page = investigator_client.get(url).content.decode()
    assert "more than 2" in page and "Create the case" not in page
    refused = investigator_client.post(url, {"title": "too much"})
    assert refused.status_code == 400 and not Case.objects.exists() and not Evidence.objects.exists()
    empty = investigator_client.post(reverse("case-from-search") + "?user=nobody", {"title": "empty"})
    assert empty.status_code == 400 and not Case.objects.exists()
    bad = investigator_client.get(reverse("case-from-search") + "?since=yesterday")
    assert bad.status_code == 400 and "Check the filter" in bad.content.decode()


def test_a_large_search_is_pinned_by_a_worker_after_the_commit(
    investigator_client, events, settings, celery_eager, django_capture_on_commit_callbacks
):
    settings.CASE_FROM_SEARCH_IN_REQUEST = 1
    matching = sorted(events.filter(user="bob").values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True) as queued:
        answer = investigator_client.post(reverse("case-from-search") + "?user=bob", {"title": "all of bob"})
    case = Case.objects.get(title="all of bob")
    assert len(queued) == 1 and answer.status_code == 302
    assert pinned_events(case) == matching
    assert f"{len(matching)} events matched, {len(matching)} pinned" in CaseNote.objects.get(case=case).text
    page = investigator_client.get(reverse("case-detail", args=[case.pk])).content.decode()
    assert "being pinned by a worker" in page


# -- the API ----------------------------------------------------------------------------


def test_the_api_pins_several_events_at_once(api_client, investigator, viewer, bobs):
    case = case_create(user=investigator, title="The orders")
    url = reverse("api-case-evidence-bulk", args=[case.pk])
    ids = [bobs[1].pk, bobs[2].pk]
    answer = api_client.post(url, {"events": [*ids, 987654321], "note": "via SIEM"}, format="json")
    assert answer.status_code == 200
    assert answer.json() == {"pinned": ids, "already_pinned": [], "missing": [987654321]}
    again = api_client.post(url, {"events": ids}, format="json").json()
    assert again == {"pinned": [], "already_pinned": ids, "missing": []}
    too_many = api_client.post(url, {"events": list(range(1, MAX_PINS_PER_REQUEST + 2))}, format="json")
    assert too_many.status_code == 400
    case_set_status(case=case, status=Case.Status.CLOSED)
    assert api_client.post(url, {"events": [bobs[3].pk]}, format="json").status_code == 409
    assert pinned_events(case) == sorted(ids)


def test_a_hostile_case_title_is_shown_as_text_in_the_marks_and_the_bar(
    investigator_client, investigator, bobs
):
    case = case_create(user=investigator, title='<script>alert(1)</script>" onmouseover="x')
    evidence_pin(case=case, event=bobs[2], user=investigator)
    page = investigator_client.get(reverse("events") + "?user=bob").content.decode()
    assert "<script>alert(1)" not in page and 'onmouseover="x' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot; onmouseover=&quot;x" in page
