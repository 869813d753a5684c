"""Saved searches from the explorer: one click, a name made from the filters, a list in the
explorer (mine, shared, my cases'), an address another user opens; case searches still work."""

from __future__ import annotations

import pytest
from django.http import QueryDict
from django.urls import reverse

from investigations.cases import case_create, saved_filter_add
from investigations.models import SavedFilter
from investigations.roles import Role, set_role
from investigations.saved_searches import default_name, search_query
from investigations.trail import AuditRecord

pytestmark = pytest.mark.django_db

BOB_DELETES = ("statement_type=DELETE&table=shop.orders&user=bob"
               "&since=2026-11-23T22:25:00&until=2026-11-24T22:25:00&tz=UTC")  # fmt: skip
LOG = (
    b"2026-01-05T09:00:00.000000Z\t    7 Connect\tbob@10.0.0.7 on shop using TCP/IP\n"
    b"2026-01-05T09:00:01.000000Z\t    7 Query\tDELETE FROM orders WHERE id = 1\n"
)


@pytest.fixture
def other(django_user_model):
    """A second investigator, to share with."""
    user = django_user_model.objects.create_user("olga", password="correct horse battery staple")
    set_role(user, Role.INVESTIGATOR)
    return user


def test_one_click_saves_with_a_name_made_from_the_filters(investigator_client, investigator) -> None:
    response = investigator_client.post(
        reverse("saved-search-create"), {"query": BOB_DELETES + "&cursor=abc"}
    )
    saved = SavedFilter.objects.get(created_by=investigator)
    assert saved.name == "DELETE on shop.orders by bob, 24 h up to 2026-11-24 22:25 UTC"
    assert saved.case is None and not saved.shared
    assert QueryDict(saved.query) == QueryDict(BOB_DELETES)  # the paging cursor is not kept
    assert response.status_code == 302 and response["Location"] == "/events/?" + saved.query
    assert AuditRecord.objects.filter(action="search_save", details__search=saved.pk).exists()
    # Saving the same filters again gives back the same search, named as before.
    again = investigator_client.post(
        reverse("saved-search-create"), {"query": BOB_DELETES}, HTTP_HX_REQUEST="true"
    )
    assert SavedFilter.objects.count() == 1
    assert "Already saved as" in again.content.decode() and "<html" not in again.content.decode()


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("", "Events"),
        ("destructive=true", "Destructive statements"),
        ("destructive=true&statement_type=DROP+TABLE&statement_type=TRUNCATE&server=db1",
         "Destructive DROP TABLE/TRUNCATE on server db1"),
        ("flag=anti_forensic&since=2026-01-05T09:00:00",
         "Events flagged anti_forensic, since 2026-01-05 09:00"),
        ("q=" + "x" * 100, "Events with “" + "x" * 59 + "…”"),
        ("fingerprint=0x5F5E926FE4F69004&host=10.0.0.7", "Statements like 0x5F5E926FE4F69004 from 10.0.0.7"),
        ("destructive=true&fingerprint=0x5F5E926FE4F69004&user=bob",
         "Destructive statements like 0x5F5E926FE4F69004 by bob"),
        ("destructive=false&user=bob", "Non-destructive events by bob"),
    ],
)  # fmt: skip
def test_default_names_say_what_the_filters_ask(query: str, name: str) -> None:
    assert default_name(QueryDict(query)) == name


def test_a_default_name_is_never_longer_than_the_field() -> None:
    params = QueryDict(mutable=True)
    for field in ("user", "host", "server", "database", "table", "q", "flag", "session"):
        params[field] = "y" * 500
    assert len(default_name(params)) == 200


def test_refuses_what_is_no_valid_search(investigator_client) -> None:
    assert (
        investigator_client.post(reverse("saved-search-create"), {"query": "since=yesterday"}).status_code
        == 400
    )
    assert (
        investigator_client.post(reverse("saved-search-create"), {"query": "q=" + "a" * 5000}).status_code
        == 400
    )
    assert not SavedFilter.objects.exists()


def test_the_explorer_lists_mine_shared_and_my_cases_searches(
    client, investigator, other, ingest_bytes
) -> None:
    ingest_bytes(LOG)
    mine = SavedFilter.objects.create(name="mine <b>bold</b>", query="user=bob", created_by=investigator)
    shared = SavedFilter.objects.create(name="olga's shared", query="user=eve", created_by=other, shared=True)
    private = SavedFilter.objects.create(name="olga's own", query="user=zed", created_by=other)
    case = case_create(user=other, title="Orders")
    case.investigators.add(investigator)
    in_case = saved_filter_add(case=case, user=other, name="olga's in the case", query="table=shop.orders")
    client.force_login(investigator)
    html = client.get("/events/?user=bob").content.decode()
    assert "mine &lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold" not in html
    assert f'href="/searches/{shared.pk}/"' in html and f'href="/searches/{in_case.pk}/"' in html
    assert f'href="/searches/{private.pk}/"' not in html
    # The search on screen is marked, and not offered for saving again.
    assert f'class="current" aria-current="true"><a href="/searches/{mine.pk}/"' in html
    assert 'name="query" value="user=bob"' not in html
    assert 'name="query" value="user=eve"' in client.get("/events/?user=eve").content.decode()


def test_a_saved_searchs_address_opens_for_another_user(client, investigator, viewer) -> None:
    saved = SavedFilter.objects.create(name="bob", query="user=bob&destructive=true", created_by=investigator)
    client.force_login(viewer)  # not shared: the address still opens for anyone with the role
    response = client.get(f"/searches/{saved.pk}/")
    assert response.status_code == 302 and response["Location"] == "/events/?user=bob&destructive=true"
    assert (
        client.get(f"/searches/{saved.pk}/?view=digest")["Location"] == "/digest/?user=bob&destructive=true"
    )
    assert client.get(f"/searches/{saved.pk}/edit/").status_code == 403  # but only its owner changes it
    assert client.post(f"/searches/{saved.pk}/delete/").status_code == 403
    assert client.get("/searches/999999/").status_code == 404
    client.logout()
    assert client.get(f"/searches/{saved.pk}/").status_code == 302
    assert "/login" in client.get(f"/searches/{saved.pk}/")["Location"]


def test_a_case_search_opens_for_investigators_only(client, investigator, viewer) -> None:
    case = case_create(user=investigator, title="Orders")
    saved = saved_filter_add(case=case, user=investigator, name="in the case", query="user=bob")
    client.force_login(viewer)
    assert client.get(f"/searches/{saved.pk}/").status_code == 403
    client.force_login(investigator)
    assert client.get(f"/searches/{saved.pk}/")["Location"] == "/events/?user=bob"


def test_its_owner_renames_and_shares_it(client, investigator, other, ingest_bytes) -> None:
    ingest_bytes(LOG)
    saved = SavedFilter.objects.create(name="Events by bob", query="user=bob", created_by=investigator)
    client.force_login(investigator)
    page = client.get(f"/searches/{saved.pk}/edit/").content.decode()
    assert f"/searches/{saved.pk}/" in page and 'value="Events by bob"' in page
    response = client.post(f"/searches/{saved.pk}/edit/", {"name": "Bob's night", "shared": "on"})
    assert response.status_code == 302
    saved.refresh_from_db()
    assert (saved.name, saved.shared) == ("Bob's night", True)
    assert client.post(f"/searches/{saved.pk}/edit/", {"name": ""}).status_code == 400
    client.force_login(other)
    assert "Bob&#x27;s night" in client.get("/events/").content.decode()
    client.force_login(investigator)
    client.post(f"/searches/{saved.pk}/delete/")
    assert not SavedFilter.objects.filter(pk=saved.pk).exists()


def test_search_query_keeps_the_filters_only() -> None:
    query = search_query(QueryDict("user=bob&cursor=x&range=24h&sort=count&q=&statement_type=DELETE&tz=UTC"))
    assert QueryDict(query) == QueryDict("user=bob&statement_type=DELETE&tz=UTC")


def test_the_digest_saves_and_lists_searches_that_open_as_digests(investigator_client, investigator) -> None:
    page = investigator_client.get("/digest/?user=bob&sort=destructive").content.decode()
    assert 'name="query" value="user=bob"' in page and 'name="view" value="digest"' in page
    response = investigator_client.post(
        reverse("saved-search-create"), {"query": "user=bob", "view": "digest"}
    )
    saved = SavedFilter.objects.get(created_by=investigator)
    assert response["Location"] == "/digest/?user=bob"
    page = investigator_client.get("/digest/?user=bob").content.decode()
    assert f'href="/searches/{saved.pk}/?view=digest">Events by bob</a>' in page
