"""The case pages: pinning from the explorer, the event, session and table pages; notes, saved
searches, closing and reopening; who may read and who may change a case."""

from __future__ import annotations

import pytest
from django.urls import reverse

from investigations.cases import case_create, evidence_pin
from investigations.models import Case, CaseNote, Evidence, SavedFilter
from investigations.roles import Role, set_role
from tests.investigations.cases_data import CULPRIT_SQL

pytestmark = pytest.mark.django_db


@pytest.fixture
def culprit(events):
    return events.get(sql=CULPRIT_SQL)


def login_as(client, django_user_model, name: str, role: Role | None):
    user = django_user_model.objects.create_user(name)
    set_role(user, role)
    client.force_login(user)
    return user


def pin_button(event_id: int) -> str:
    return f"{reverse('pin')}?event={event_id}"


def test_every_place_that_shows_an_event_offers_to_pin_it(investigator_client, culprit):
    places = [
        reverse("events") + "?user=bob",
        reverse("event-detail", args=[culprit.pk]),
        reverse("session-detail", args=[culprit.session_id]),
        reverse("table-detail", args=["shop.orders"]),
    ]
    for url in places:
        page = investigator_client.get(url).content.decode()
        assert pin_button(culprit.pk) in page, url


def test_the_pin_form_preselects_the_most_recent_open_case(investigator_client, investigator, culprit):
    case_create(user=investigator, title="Older case")
    newer = case_create(user=investigator, title="The orders")
    closed = case_create(user=investigator, title="Done with")
    closed.status = Case.Status.CLOSED
    closed.save()
    form = investigator_client.get(pin_button(culprit.pk), HTTP_HX_REQUEST="true").content.decode()
    assert f'<option value="{newer.pk}" selected>#{newer.pk} The orders</option>' in form
    assert "Done with" not in form
    assert '<option value="new">New case…</option>' in form


def test_one_post_pins_the_event_with_its_note(investigator_client, investigator, culprit):
    case = case_create(user=investigator, title="The orders")
    answer = investigator_client.post(
        reverse("pin"), {"event": culprit.pk, "case": case.pk, "note": "bob's DELETE"}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 200
    assert f'Pinned to <a href="{reverse("case-detail", args=[case.pk])}">' in answer.content.decode()
    pin = Evidence.objects.get(case=case)
    assert (pin.event_id, pin.note, pin.pinned_by) == (culprit.pk, "bob's DELETE", investigator)
    assert bytes(pin.event_record_hash) == bytes(culprit.record_hash)
    again = investigator_client.post(reverse("pin"), {"event": culprit.pk, "case": case.pk})
    assert again.status_code == 400 and "already pinned" in again.content.decode()
    assert Evidence.objects.filter(case=case).count() == 1


def test_pinning_into_a_new_case_opens_it_with_the_pinner_as_investigator(
    investigator_client, investigator, culprit
):
    answer = investigator_client.post(
        reverse("pin"), {"event": culprit.pk, "case": "new", "title": "Wiped orders"}
    )
    case = Case.objects.get(title="Wiped orders")
    assert answer.status_code == 302 and answer["Location"].startswith(reverse("case-detail", args=[case.pk]))
    assert list(case.investigators.all()) == [investigator]
    assert case.evidence.get().event_id == culprit.pk
    nameless = investigator_client.post(reverse("pin"), {"event": culprit.pk, "case": "new", "title": " "})
    assert nameless.status_code == 400 and "Name the new case." in nameless.content.decode()
    in_popover = investigator_client.post(
        reverse("pin"), {"event": culprit.pk, "case": "new", "title": ""}, HTTP_HX_REQUEST="true"
    )
    assert in_popover.status_code == 200  # htmx swaps it: the popover shows the error
    assert "Name the new case." in in_popover.content.decode() and "<html" not in in_popover.content.decode()


def test_the_case_page_shows_the_evidence_in_time_order_with_notes(investigator_client, investigator, events):
    case = case_create(user=investigator, title="The orders")
    drop, delete = events.get(statement_type="DROP TABLE"), events.get(sql=CULPRIT_SQL)
    evidence_pin(case=case, event=drop, user=investigator, note="then the archive")
    evidence_pin(case=case, event=delete, user=investigator, note="first the orders")
    investigator_client.post(reverse("case-note", args=[case.pk]), {"text": "bob <script>x</script> did it"})
    page = investigator_client.get(reverse("case-detail", args=[case.pk])).content.decode()
    assert page.index("first the orders") < page.index("then the archive")
    assert "bob &lt;script&gt;x&lt;/script&gt; did it" in page and "<script>x" not in page
    note = CaseNote.objects.get(case=case)
    assert (note.author, note.text) == (investigator, "bob <script>x</script> did it")
    assert "2 pinned events" in page and "2 destructive" in page


def test_unpinning_removes_the_evidence(investigator_client, investigator, culprit):
    case = case_create(user=investigator, title="The orders")
    evidence_pin(case=case, event=culprit, user=investigator)
    investigator_client.post(reverse("case-unpin", args=[case.pk, culprit.pk]))
    assert not Evidence.objects.filter(case=case).exists()
    again = investigator_client.post(reverse("case-unpin", args=[case.pk, culprit.pk]))
    assert again.status_code == 302  # gone already: nothing to do


def test_a_search_is_saved_with_the_case_and_reopens_the_explorer(investigator_client, investigator, events):
    case = case_create(user=investigator, title="The orders")
    url = "http://auditweb.example/events/?user=bob&destructive=true"
    investigator_client.post(reverse("case-filter", args=[case.pk]), {"name": "bob's damage", "query": url})
    saved = SavedFilter.objects.get(case=case)
    assert (saved.name, saved.query) == ("bob's damage", "user=bob&destructive=true")
    page = investigator_client.get(reverse("case-detail", args=[case.pk])).content.decode()
    assert f'href="{reverse("events")}?user=bob&amp;destructive=true"' in page
    explorer = investigator_client.get(reverse("events") + "?user=bob").content.decode()
    assert reverse("case-save-search") + "?query=user%3Dbob" in explorer
    investigator_client.post(
        reverse("case-save-search"), {"case": case.pk, "name": "all of bob", "query": "user=bob"}
    )
    assert case.saved_filters.filter(name="all of bob", query="user=bob").exists()


def test_a_closed_case_takes_no_notes_until_reopened(investigator_client, investigator, culprit):
    case = case_create(user=investigator, title="The orders")
    investigator_client.post(reverse("case-status", args=[case.pk]), {"status": "closed"})
    case.refresh_from_db()
    assert case.status == "closed" and case.closed_at is not None
    assert investigator_client.post(reverse("case-note", args=[case.pk]), {"text": "late"}).status_code == 409
    pin = investigator_client.post(reverse("pin"), {"event": culprit.pk, "case": case.pk})
    assert pin.status_code == 400 and not Evidence.objects.exists()  # a closed case is not offered
    investigator_client.post(reverse("case-status", args=[case.pk]), {"status": "open"})
    case.refresh_from_db()
    assert case.status == "open" and case.closed_at is None


def test_the_case_list_shows_open_cases_and_mine(investigator_client, investigator, django_user_model):
    other = django_user_model.objects.create_user("olga")
    set_role(other, Role.INVESTIGATOR)
    case_create(user=investigator, title="Mine & open")
    case_create(user=other, title="Olga's")
    page = investigator_client.get(reverse("cases")).content.decode()
    assert "Mine &amp; open" in page and "Olga&#x27;s" in page
    mine = investigator_client.get(reverse("cases") + "?mine=1").content.decode()
    assert "Mine &amp; open" in mine and "Olga&#x27;s" not in mine


def test_a_viewer_sees_no_cases_and_no_pin_buttons(client, django_user_model, culprit):
    login_as(client, django_user_model, "vic", Role.VIEWER)
    assert client.get(reverse("cases")).status_code == 403
    assert client.get(pin_button(culprit.pk)).status_code == 403
    explorer = client.get(reverse("events") + "?user=bob").content.decode()
    assert pin_button(culprit.pk) not in explorer and reverse("cases") not in explorer


def test_anonymous_visitors_are_sent_to_log_in(client, culprit):
    answer = client.get(reverse("cases"))
    assert answer.status_code == 302 and answer["Location"].startswith(reverse("login"))


def test_only_the_cases_investigators_and_admins_change_it(client, django_user_model, investigator, culprit):
    case = case_create(user=investigator, title="Ivy's case")
    login_as(client, django_user_model, "olga", Role.INVESTIGATOR)
    assert client.get(reverse("case-detail", args=[case.pk])).status_code == 200  # may read it
    refused = [
        client.post(reverse("case-note", args=[case.pk]), {"text": "mine now"}),
        client.post(reverse("case-status", args=[case.pk]), {"status": "closed"}),
        client.get(reverse("case-edit", args=[case.pk])),
        client.post(reverse("case-report", args=[case.pk]), {"format": "csv"}),
        client.post(reverse("case-unpin", args=[case.pk, culprit.pk])),
    ]
    assert [r.status_code for r in refused] == [403] * 5
    # Olga's pin form does not offer Ivy's case, and posting to it anyway is refused.
    assert "Ivy&#x27;s case" not in client.get(pin_button(culprit.pk)).content.decode()
    assert client.post(reverse("pin"), {"event": culprit.pk, "case": case.pk}).status_code == 400
    assert not case.notes.exists() and not case.reports.exists() and not case.evidence.exists()

    login_as(client, django_user_model, "root", Role.ADMIN)
    client.post(reverse("case-note", args=[case.pk]), {"text": "reviewed"})
    assert case.notes.get().text == "reviewed"


def test_an_investigator_edits_the_case_and_adds_a_colleague(
    investigator_client, investigator, django_user_model
):
    olga = django_user_model.objects.create_user("olga")
    set_role(olga, Role.INVESTIGATOR)
    case = case_create(user=investigator, title="Draft")
    answer = investigator_client.post(
        reverse("case-edit", args=[case.pk]),
        {"title": "Wiped orders", "description": "Night of 4 March", "window_start": "2026-03-04T22:00:00",
         "window_end": "2026-03-04T23:00:00", "investigators": [investigator.pk, olga.pk]},
    )  # fmt: skip
    assert answer.status_code == 302
    case.refresh_from_db()
    assert case.title == "Wiped orders" and set(case.investigators.all()) == {investigator, olga}
    assert case.window_start.isoformat() == "2026-03-04T22:00:00+00:00"
    backwards = investigator_client.post(
        reverse("case-edit", args=[case.pk]),
        {"title": "x", "window_start": "2026-03-05T00:00:00", "window_end": "2026-03-04T00:00:00",
         "investigators": [investigator.pk]},
    )  # fmt: skip
    assert "The window ends before it starts." in backwards.content.decode()


def test_opening_a_case_and_pinning_are_in_the_audit_trail(investigator_client, culprit):
    from investigations.trail import Action, AuditRecord

    investigator_client.post(reverse("pin"), {"event": culprit.pk, "case": "new", "title": "Wiped orders"})
    case = Case.objects.get(title="Wiped orders")
    opened = AuditRecord.objects.get(action=Action.CASE_CREATE)
    pinned = AuditRecord.objects.get(action=Action.CASE_CHANGE)
    assert opened.details == {"case": case.pk, "title": "Wiped orders"} and opened.username == "ivy"
    assert pinned.details == {"case": case.pk, "what": "pin", "event": culprit.pk}
