"""The digest (page and API) over the crime scene's logs, ingested by the real pipeline: every
figure is compared with the same figure counted in Python over the stored events, and one
fingerprint with the hand-written truth of the scene."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter, defaultdict

import pytest

from ingest.models import Event
from investigations.models import api_token_create
from investigations.query.digest import SAMPLE_CHARS, digest
from investigations.query.filters import filter_events, query_id

from ..conftest import FIXTURES

CRIME = FIXTURES / "crime_scene"
TRUTH = json.loads((CRIME / "truth.json").read_text())
LOGS = {"crime-general": (TRUTH["files"]["general_log"], "general-log"),
        "crime-audit": (TRUTH["files"]["server_audit"], "mariadb-audit")}  # fmt: skip
DELETE_BY_ID = "delete from orders where id = ?"


@pytest.fixture
def crime_scene(tmp_path):
    """The general log and server_audit of the scene, ingested by the pipeline in each test's
    transaction (rolled back after it: nothing committed is left for other tests)."""
    from ingest.pipeline import ingest_file, source_for_path

    for server, (files, fmt) in LOGS.items():
        for name in files:
            path = tmp_path / server / name
            path.parent.mkdir(exist_ok=True)
            shutil.copyfile(CRIME / name, path)
            run = ingest_file(path, source=source_for_path(path, server=server, fmt=fmt, tz="UTC"), fmt=fmt)
            assert run.events_stored > 100 and run.problems == 0, (name, run.events_stored, run.problems)


pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("crime_scene")]


def counted_in_python(params: dict) -> dict[str, dict]:
    """The digest's figures, counted one event at a time."""

    def empty() -> dict:
        return {"count": 0, "destructive": 0, "times": [], "users": Counter(), "servers": Counter(),
                "tables": Counter()}  # fmt: skip

    rows: dict[str, dict] = defaultdict(empty)
    for e in filter_events(params).qs.exclude(fingerprint=""):
        r = rows[e.fingerprint]
        r["count"] += 1
        r["destructive"] += e.destructive
        r["times"] += [e.occurred_at] if e.occurred_at else []
        r["users"][e.user] += 1
        r["servers"][e.server] += 1
        r["tables"].update(e.tables)
    return rows


@pytest.mark.parametrize("params", [{}, {"destructive": "true"}, {"server": "crime-general"},
                                    {"table": "orders", "user": "bob"}])  # fmt: skip
def test_every_figure_equals_the_events_counted_one_by_one(params) -> None:
    found = digest(filter_events(params).qs, limit=500)
    expected = counted_in_python(params)
    assert found.rows and found.more == 0
    assert {r.fingerprint for r in found.rows} == set(expected)
    assert found.statements == sum(r["count"] for r in expected.values())
    assert found.without_statement == filter_events(params).qs.filter(fingerprint="").count()
    for row in found.rows:
        want = expected[row.fingerprint]
        assert (row.count, row.destructive) == (want["count"], want["destructive"])
        assert (row.first, row.last) == (min(want["times"]), max(want["times"]))
        assert row.share == pytest.approx(want["count"] / found.statements)
        for top, counts in ((row.accounts, want["users"]), (row.servers, want["servers"]),
                            (row.tables, want["tables"])):  # fmt: skip
            assert top.distinct == len(counts)
            assert [n for _, n in top.values] == sorted(counts.values(), reverse=True)[:3]
            assert all(counts[value] == n for value, n in top.values)
        sample = Event.objects.get(pk=row.sample_id)
        assert sample.fingerprint == row.fingerprint and row.sample_sql == sample.sql[:SAMPLE_CHARS]
    assert [r.count for r in found.rows] == sorted((r.count for r in found.rows), reverse=True)


def test_the_delete_by_id_fingerprint_matches_the_scenes_truth() -> None:
    """What the scene's author wrote down, not what AuditWeb classified: the general log holds
    each `DELETE FROM orders WHERE id = N` (and the prepared `= ?`) the scenario ran."""
    truth = [e for e in TRUTH["entries"] if "general_log" in e["logged_by"]
             and re.fullmatch(r"DELETE FROM orders WHERE id = (\d+|\?)", e["sql"])]  # fmt: skip
    found = digest(filter_events({"server": "crime-general"}).qs, limit=500)
    row = next(r for r in found.rows if r.fingerprint == DELETE_BY_ID)
    assert row.count == len(truth) >= 3
    assert row.destructive == sum(e["destructive"] for e in truth)
    assert dict(row.accounts.values) == Counter(e["user"] for e in truth)
    assert row.tables.values == [("shop.orders", len(truth))]


def test_sorting_orders_rows_by_the_column_asked(investigator_client) -> None:
    qs = filter_events({}).qs
    first = digest(qs, sort="first", limit=500).rows
    assert [r.first for r in first] == sorted(r.first for r in first)
    last = digest(qs, sort="last", limit=500).rows
    assert [r.last for r in last] == sorted((r.last for r in last), reverse=True)
    destructive = digest(qs, sort="destructive", limit=3)
    assert [r.destructive for r in destructive.rows] == sorted((r.destructive for r in first), reverse=True)[
        :3
    ]
    assert destructive.more == destructive.fingerprints - 3 > 0


def test_the_page_shows_each_fingerprint_linked_to_its_events(investigator_client) -> None:
    html = investigator_client.get("/digest/?server=crime-general&sort=destructive&tz=UTC").content.decode()
    qid = query_id(DELETE_BY_ID)
    assert f'href="/events/?server=crime-general&amp;tz=UTC&amp;fingerprint={qid}"' in html
    assert DELETE_BY_ID in html and "(UTC)" in html
    assert '<span aria-sort="descending">Destructive' in html
    # The explorer's tab keeps the filters (and drops the digest's sort).
    assert 'href="/events/?server=crime-general&amp;tz=UTC">Events</a>' in html
    explorer = investigator_client.get(f"/events/?server=crime-general&fingerprint={qid}").content.decode()
    assert 'href="/digest/?server=crime-general&amp;fingerprint=' in explorer


def test_the_fingerprint_filter_takes_the_text_or_its_query_id(api_client) -> None:
    expected = set(Event.objects.filter(fingerprint=DELETE_BY_ID).values_list("id", flat=True))
    assert len(expected) >= 4
    for value in (DELETE_BY_ID, query_id(DELETE_BY_ID), query_id(DELETE_BY_ID).lower()):
        got = api_client.get("/api/v1/events/", {"fingerprint": value, "page_size": 1000}).json()
        assert {e["id"] for e in got["results"]} == expected
    assert api_client.get("/api/v1/events/", {"fingerprint": "0x" + "0" * 16}).json()["results"] == []


def test_the_explorer_lists_only_the_fingerprints_events(investigator_client) -> None:
    html = investigator_client.get(f"/events/?fingerprint={query_id(DELETE_BY_ID)}").content.decode()
    count = Event.objects.filter(fingerprint=DELETE_BY_ID).count()
    assert f"{count} events match." in html
    assert "DELETE FROM orders WHERE id = 5" in html and "UPDATE orders" not in html


def test_the_api_answers_the_digest_with_its_figures(api_client) -> None:
    body = api_client.get("/api/v1/digest/", {"server": "crime-general", "limit": 500}).json()
    expected = counted_in_python({"server": "crime-general"})
    assert body["fingerprints"] == len(expected) == len(body["results"]) and body["more"] == 0
    row = next(r for r in body["results"] if r["fingerprint"] == DELETE_BY_ID)
    want = expected[DELETE_BY_ID]
    assert row["query_id"] == query_id(DELETE_BY_ID)
    assert (row["count"], row["destructive"]) == (want["count"], want["destructive"])
    assert row["accounts"]["distinct"] == len(want["users"])
    assert row["first_seen"].endswith("Z") and row["sample"]["sql"].startswith("DELETE FROM orders")
    assert api_client.get("/api/v1/digest/", {"sort": "sideways"}).status_code == 400
    assert api_client.get("/api/v1/digest/", {"since": "yesterday"}).status_code == 400
    assert len(api_client.get("/api/v1/digest/", {"limit": 2}).json()["results"]) == 2


def test_who_may_see_the_digest(client, viewer, django_user_model) -> None:
    assert client.get("/digest/").status_code == 302  # to the login page
    assert client.get("/api/v1/digest/").status_code == 401
    nobody = django_user_model.objects.create_user("nora", password="correct horse battery staple")
    client.force_login(nobody)
    assert client.get("/digest/").status_code == 403
    client.force_login(viewer)
    assert client.get("/digest/").status_code == 200
    _, key = api_token_create(user=viewer, siem=True)
    refused = client.get("/api/v1/digest/", HTTP_AUTHORIZATION=f"Token {key}")
    assert refused.status_code == 403  # a SIEM token reads events and alerts only


def test_hostile_statements_are_escaped_and_cut(investigator_client, ingest_bytes) -> None:
    long_tail = "x" * (SAMPLE_CHARS + 500)
    ingest_bytes(
        b"2026-01-05T09:00:00.000000Z\t    7 Connect\tmallory@evil on shop using TCP/IP\n"
        b"2026-01-05T09:00:01.000000Z\t    7 Query\tDELETE FROM `<script>alert(1)</script>` WHERE a = 1\n"
        b"2026-01-05T09:00:02.000000Z\t    7 Query\tSELECT '" + long_tail.encode() + b"' FROM t\n",
        server="hostile",
    )
    html = investigator_client.get("/digest/?server=hostile").content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    row = next(
        r for r in digest(filter_events({"server": "hostile"}).qs).rows if r.fingerprint.startswith("select")
    )
    assert row.sample_truncated and len(row.sample_sql) == SAMPLE_CHARS
