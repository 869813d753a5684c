"""Binary logs in the store and the API (issue 21, second layer), against the real binlog scene.

The scene's binlogs and general log go through `manage.py ingest` in one command, binlogs
first and last (any order must do); then every destructive statement of the truth is looked
up as a stored event, and its `rows_changed`, `/rows/` and `/flashback/` are compared with
what the server itself returned.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import F

from ingest.binlog_join import join_binlogs
from ingest.follow import ingest_source
from ingest.models import (
    BinlogChange,
    BinlogFile,
    BinlogJoinState,
    BinlogStatement,
    BinlogTransaction,
    Event,
    ParseProblem,
    Session,
    Source,
)

SCENE = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_scene"
TRUTH_FILE = SCENE / "truth.json"
TRUTH: dict[str, Any] = json.loads(TRUTH_FILE.read_text()) if TRUTH_FILE.exists() else {}
pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not TRUTH, reason="tests/fixtures/binlog_scene has no truth.json: run regenerate.py"),
]
SERVER = "scene"
DESTRUCTIVE = [e for e in TRUTH.get("statements", []) if e["change"]]


def _ingest(*names: str) -> str:
    out = io.StringIO()
    call_command("ingest", *(str(SCENE / n) for n in names), "--server", SERVER, stdout=out)
    return out.getvalue()


def _scene_in_this_order() -> list[str]:
    binlogs = TRUTH["files"]["binlog"]
    # The second binlog before the general log, the others after it: the join must not care.
    return [binlogs[1], *TRUTH["files"]["general_log"], binlogs[0], binlogs[2]]


@pytest.fixture
def scene() -> None:
    _ingest(*_scene_in_this_order())


def _canon(rows: list[Any]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows)


def _event(entry: dict[str, Any]) -> Event:
    """The stored event of a truth entry: same boot (in order), connection and text, the nth such."""
    boots = sorted(set(Session.objects.filter(server=SERVER).values_list("boot", flat=True)))
    same = list(
        Event.objects.filter(
            server=SERVER,
            connection_id=entry["connection_id"],
            sql=entry["sql"],
            session__boot=boots[entry["boot"] - 1],
        ).order_by("id")
    )
    earlier = [
        e
        for e in TRUTH["statements"]
        if e["seq"] < entry["seq"]
        and (e["boot"], e["connection_id"], e["sql"]) == (entry["boot"], entry["connection_id"], entry["sql"])
    ]
    return same[len(earlier)]


def _all_rows(api_client: Any, event: Event, page_size: int = 1) -> tuple[dict, list[dict]]:
    """Every row of /rows/, following `next` (pages of one row: the paging is exercised too)."""
    url: str | None = f"/api/v1/events/{event.pk}/rows/?page_size={page_size}"
    rows: list[dict] = []
    first: dict | None = None
    while url:
        answer = api_client.get(url)
        assert answer.status_code == 200, answer.content
        body = answer.json()
        first = first or body
        rows += body["rows"]
        assert len(body["rows"]) <= page_size
        url = body["next"]
    assert first is not None
    return first, rows


def test_binlogs_and_the_general_log_in_one_command_store_each_transaction_once() -> None:
    out = _ingest(*_scene_in_this_order())
    assert "binlog transactions stored" in out
    counts = (BinlogFile.objects.count(), BinlogTransaction.objects.count(), BinlogStatement.objects.count())
    changes = BinlogChange.objects.count()
    assert counts[0] == 3 and counts[2] > 0 and changes >= counts[2]
    assert BinlogFile.objects.filter(boot_started_at__isnull=False).count() == 2  # the start, the restart
    again = _ingest(*reversed(_scene_in_this_order()))  # again, in the other order: nothing new
    assert "0 new" in again and "binlog transactions stored" not in again
    assert (
        BinlogFile.objects.count(),
        BinlogTransaction.objects.count(),
        BinlogStatement.objects.count(),
    ) == (counts)
    assert BinlogChange.objects.count() == changes
    assert not BinlogStatement.objects.filter(confidence="").exists()  # every one joined


def test_each_destructive_statement_has_exactly_its_rows_and_confidence(scene: None, api_client: Any) -> None:
    # One ingest of the scene for all of them (each statement is its own test in test_binlog_scene.py).
    assert DESTRUCTIVE
    for entry in DESTRUCTIVE:
        _check_statement(api_client, entry)


def _check_statement(api_client: Any, entry: dict[str, Any]) -> None:
    event = _event(entry)
    listed = api_client.get(
        f"/api/v1/events/?server={SERVER}&connection_id={entry['connection_id']}&page_size=1000"
    )
    (shown,) = [e for e in listed.json()["results"] if e["id"] == event.pk]
    answer, rows = _all_rows(api_client, event)
    if entry["expect"] == "ambiguous":
        # One of two that fit equally well: no count as fact, the two row statements shown as such.
        assert shown["rows_changed"] is None and answer["rows_changed"] is None
        assert answer["confidence"] == "ambiguous"
        assert all(event.pk in s["candidates"] for s in answer["statements"])
        assert len(answer["statements"]) == 2
        return
    if entry["expect"] == "unlinked":
        # A CALL: the general log holds only the CALL; its body's rows stay visible, unlinked.
        assert shown["rows_changed"] is None
        assert answer["confidence"] == "unlinked"
        assert answer["evidence"][0].startswith("routine")
        assert _canon([r["before"] for r in rows]) == _canon(entry["before"])
        return
    assert shown["rows_changed"] == answer["rows_changed"] == entry["rows_affected"] == len(rows)
    assert answer["confidence"] == entry["expect"]
    assert answer["evidence"] and answer["count"] == len(rows)
    assert {r["change"] for r in rows} == {entry["change"]}
    assert _canon([r["before"] for r in rows if r["before"] is not None]) == _canon(entry["before"])
    assert _canon([r["after"] for r in rows if r["after"] is not None]) == _canon(entry["after"])


def test_the_ambiguous_statements_rows_are_theirs_together(scene: None, api_client: Any) -> None:
    entries = [e for e in DESTRUCTIVE if e["expect"] == "ambiguous"]
    _, rows = _all_rows(api_client, _event(entries[0]), page_size=1000)
    assert _canon([r["before"] for r in rows]) == _canon([r for e in entries for r in e["before"]])


def test_a_rolled_back_statement_covered_by_the_binlog_changed_no_rows(scene: None, api_client: Any) -> None:
    (entry,) = [e for e in TRUTH["statements"] if "rolled back" in e["note"]]
    event = _event(entry)
    shown = api_client.get(f"/api/v1/events/{event.pk}/").json()
    assert shown["rows_changed"] == 0
    answer = api_client.get(f"/api/v1/events/{event.pk}/rows/").json()
    assert (answer["rows"], answer["confidence"], answer["next"]) == ([], None, None)
    flashback = api_client.get(f"/api/v1/events/{event.pk}/flashback/")
    assert flashback.status_code == 200 and "nothing to undo" in flashback.content.decode()
    statements = [line for line in flashback.content.decode().splitlines() if not line.startswith("--")]
    assert statements == ["SET NAMES utf8mb4;", "START TRANSACTION;", "COMMIT;"]


def test_flashback_puts_back_a_delete_and_refuses_an_ambiguous_link(scene: None, api_client: Any) -> None:
    entry = next(e for e in DESTRUCTIVE if e["expect"] == "unique_text_and_time" and e["change"] == "delete")
    answer = api_client.get(f"/api/v1/events/{_event(entry).pk}/flashback/")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/plain")
    sql = answer.content.decode()
    lines = sql.splitlines()
    assert lines[-1] == "COMMIT;" and "START TRANSACTION;" in lines
    inserts = [line for line in lines if line.startswith("INSERT INTO ")]
    assert len(inserts) == entry["rows_affected"]
    for row in entry["before"]:
        key = next(iter(row.items()))  # the first column (id or account) with its value
        assert any(f"{key[1]!r}".strip("'") in line for line in inserts), row
    ambiguous = next(e for e in DESTRUCTIVE if e["expect"] == "ambiguous")
    assert api_client.get(f"/api/v1/events/{_event(ambiguous).pk}/flashback/").status_code == 409


def test_events_of_a_server_without_binlogs_have_no_rows_changed(api_client: Any) -> None:
    _ingest(*TRUTH["files"]["general_log"])
    listed = api_client.get(f"/api/v1/events/?server={SERVER}&destructive=true").json()["results"]
    assert listed and all(e["rows_changed"] is None for e in listed)
    assert not BinlogStatement.objects.exists()


def test_rows_page_size_is_bounded(scene: None, api_client: Any) -> None:
    entry = next(e for e in DESTRUCTIVE if e["rows_affected"] == 2 and e["expect"] == "unique_text_and_time")
    event = _event(entry)
    body = api_client.get(f"/api/v1/events/{event.pk}/rows/?page_size=999999").json()
    assert len(body["rows"]) == 2 and body["next"] is None
    assert api_client.get(f"/api/v1/events/{event.pk}/rows/?page_size=x").status_code == 400


def test_the_export_and_the_alerts_give_the_same_rows_changed_as_the_list(
    scene: None, api_client: Any
) -> None:
    listed = {
        e["id"]: e["rows_changed"]
        for e in api_client.get(f"/api/v1/events/?server={SERVER}&destructive=true&page_size=1000").json()[
            "results"
        ]
    }
    assert {0, 1, 2, None} <= set(listed.values())  # linked, covered with none, candidates only
    export = api_client.get(f"/api/v1/events/export.ndjson?server={SERVER}&destructive=true")
    lines = [json.loads(line) for line in b"".join(export.streaming_content).splitlines()]
    assert {e["id"]: e["rows_changed"] for e in lines} == listed
    ecs = api_client.get(f"/api/v1/events/export.ndjson?server={SERVER}&destructive=true&schema=ecs")
    lines = [json.loads(line) for line in b"".join(ecs.streaming_content).splitlines()]
    assert {int(e["event"]["id"]): e["auditweb"]["rows_changed"] for e in lines} == listed
    alerts = api_client.get("/api/v1/alerts/?page_size=1000").json()["results"]
    shown = {a["event"]["id"]: a["event"]["rows_changed"] for a in alerts if a["event"]}
    assert shown and all(listed[i] == n for i, n in shown.items() if i in listed)


def test_a_binlog_cut_short_keeps_its_whole_transactions_and_the_rest_comes_with_the_next_read(
    tmp_path: Path,
) -> None:
    data = (SCENE / TRUTH["files"]["binlog"][0]).read_bytes()
    copy = tmp_path / TRUTH["files"]["binlog"][0]  # the same name: a file still being written
    copy.write_bytes(data[: len(data) * 2 // 3])
    out = io.StringIO()
    call_command("ingest", str(copy), "--server", SERVER, stdout=out)
    assert "1 problems" in out.getvalue() or "2 problems" in out.getvalue()
    part = BinlogTransaction.objects.count()
    (problem,) = ParseProblem.objects.filter(source_file__path=str(copy)).values_list("reason", flat=True)[:1]
    assert "ends inside a transaction" in problem or "truncated" in problem
    assert part > 0
    copy.write_bytes(data)  # it grew: read again, only what was missing is stored
    call_command("ingest", str(copy), "--server", SERVER, stdout=io.StringIO())
    whole = BinlogTransaction.objects.count()
    call_command("ingest", str(SCENE / TRUTH["files"]["binlog"][0]), "--server", SERVER, stdout=io.StringIO())
    assert whole > part and BinlogTransaction.objects.count() == whole  # the original adds nothing


def test_rows_changed_min_keeps_the_events_that_changed_that_many_rows(scene: None, api_client: Any) -> None:
    found = api_client.get(f"/api/v1/events/?server={SERVER}&rows_changed_min=2").json()["results"]
    expected = {_event(e).pk for e in DESTRUCTIVE if e["expect"] not in ("ambiguous", "unlinked")
                and e["rows_affected"] >= 2}  # fmt: skip
    assert expected and {e["id"] for e in found} == expected
    assert all(e["rows_changed"] >= 2 for e in found)
    assert api_client.get("/api/v1/events/?rows_changed_min=0").status_code == 400


def _page(client: Any, event: Event, query: str = "") -> str:
    answer = client.get(f"/events/{event.pk}/{query}")
    assert answer.status_code == 200
    return answer.content.decode()


def test_the_event_page_shows_an_updates_rows_with_the_changed_cells_marked(
    scene: None, investigator_client: Any
) -> None:
    entry = next(e for e in DESTRUCTIVE if e["change"] == "update" and e["expect"] == "unique_text_and_time")
    page = _page(investigator_client, _event(entry))
    section = page[page.index('id="binlog-rows"') : page.index("In the same session")]
    assert "unique_text_and_time" in section and "Download flashback SQL" in section
    # The truth holds the rows as the server returned them, before and after, in the same order.
    changed = sum(
        1
        for b, a in zip(entry["before"], entry["after"], strict=True)
        for column in b
        if b[column] != a[column]
    )
    # Side by side: each changed cell marked in the before image and in the after image.
    assert changed and len(re.findall(r'class="mono changed[ "]', section)) == 2 * changed
    assert "the only statement with this text at that moment" in section


def test_the_event_page_says_ambiguous_rows_are_not_fact_and_offers_no_flashback(
    scene: None, investigator_client: Any
) -> None:
    entry = next(e for e in DESTRUCTIVE if e["expect"] == "ambiguous")
    section = _page(investigator_client, _event(entry)).split('id="binlog-rows"')[1]
    assert "ambiguous" in section and "not as fact" in section
    assert "Download flashback SQL" not in section
    other = next(e for e in DESTRUCTIVE if e["expect"] == "ambiguous" and e is not entry)
    assert f'href="/events/{_event(other).pk}/"' in section  # the other candidate, linked


def test_the_event_page_pages_the_rows(scene: None, investigator_client: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("investigations.query.binlog.PAGE_ROWS", 1)
    entry = next(e for e in DESTRUCTIVE if e["rows_affected"] == 2 and e["expect"] == "unique_text_and_time")
    first = _page(investigator_client, _event(entry))
    second = _page(investigator_client, _event(entry), "?rows_page=2")
    assert "Rows 1\u20131 of 2" in first and 'rel="next"' in first
    assert "Rows 2\u20132 of 2" in second and 'rel="prev"' in second
    assert _page(investigator_client, _event(entry), "?rows_page=x").count("Rows 1\u20131 of 2") == 1


def test_the_event_page_of_a_statement_no_binlog_covers_says_so(investigator_client: Any) -> None:
    _ingest(*TRUTH["files"]["general_log"])
    event = Event.objects.filter(server=SERVER, destructive=True).first()
    assert event is not None
    assert "No binary log AuditWeb holds covers this statement" in _page(investigator_client, event)


def test_a_general_log_followed_after_the_binlogs_were_ingested_is_joined_at_its_poll(tmp_path: Path) -> None:
    _ingest(*TRUTH["files"]["binlog"])
    assert not BinlogStatement.objects.filter(event_id__isnull=False).exists()  # nothing to link yet
    log = tmp_path / "general.log"
    log.write_bytes((SCENE / TRUTH["files"]["general_log"][0]).read_bytes())
    source = Source.objects.create(
        name="followed scene", kind=Source.Kind.FILE, path=str(log), server=SERVER, format="general-log"
    )
    run = ingest_source(source.pk)
    assert run is not None and run.events_stored
    sure = BinlogStatement.objects.filter(confidence__in=BinlogStatement.SURE)
    assert sure.count() == len([e for e in DESTRUCTIVE if e["expect"] not in ("ambiguous", "unlinked")])


def test_the_explorer_narrows_to_statements_that_changed_at_least_so_many_rows(
    scene: None, investigator_client: Any
) -> None:
    page = investigator_client.get(f"/events/?server={SERVER}&rows_changed_min=2").content.decode()
    assert 'name="rows_changed_min"' in page and 'value="2"' in page
    wanted = {_event(e).pk for e in DESTRUCTIVE if e["expect"] not in ("ambiguous", "unlinked")
              and e["rows_affected"] >= 2}  # fmt: skip
    others = {_event(e).pk for e in DESTRUCTIVE} - wanted
    assert all(f'href="/events/{pk}/"' in page for pk in wanted)
    assert not any(f'href="/events/{pk}/"' in page for pk in others)


def test_the_join_takes_up_unsure_rows_again_only_where_new_events_reach_them(
    scene: None, tmp_path: Path
) -> None:
    unsure = BinlogStatement.objects.filter(confidence__in=["ambiguous", "unlinked"])
    before = sorted(unsure.values_list("id", "confidence", "candidates"))
    assert before
    assert join_binlogs(SERVER) == 0  # nothing new since the command's join
    # Another day's statements of the same server: nowhere near the unsure rows' moments.
    assert "joined" not in _ingest_other(SCENE.parent / "crime_scene" / "mariadb-10.11.19-general.log")
    assert join_binlogs(SERVER) == 0
    # A statement in the second of the two identical DELETEs: their rows are looked at again,
    # and stay as unsure as they were (a SELECT explains no rows).
    log = tmp_path / "late.log"
    log.write_bytes(b"Time\t\t    Id Command\tArgument\n261125  1:22:04\t   999 Query\tSELECT 1\n")
    assert "1 new" in (out := _ingest_other(log)) and "binlog row statements joined" in out
    assert join_binlogs(SERVER) == 0  # the command joined them already
    assert sorted(unsure.values_list("id", "confidence", "candidates")) == before
    assert BinlogJoinState.objects.get(server=SERVER).events_seen == Event.objects.order_by("-id")[0].pk


def _ingest_other(path: Path) -> str:
    out = io.StringIO()
    call_command("ingest", str(path), "--server", SERVER, stdout=out)
    return out.getvalue()


def test_a_gzipped_binlog_is_recognised_stored_and_its_rows_read(tmp_path: Path, api_client: Any) -> None:
    for name in TRUTH["files"]["binlog"]:
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress((SCENE / name).read_bytes()))
    _ingest(*TRUTH["files"]["general_log"])
    call_command(
        "ingest", *sorted(str(p) for p in tmp_path.glob("*.gz")), "--server", SERVER, stdout=io.StringIO()
    )
    assert BinlogTransaction.objects.count() > 0
    entry = next(e for e in DESTRUCTIVE if e["expect"] == "unique_text_and_time" and e["change"] == "delete")
    _, rows = _all_rows(api_client, _event(entry))
    assert _canon([r["before"] for r in rows]) == _canon(entry["before"])


def test_rows_no_statement_explains_stay_visible(scene: None, investigator_client: Any) -> None:
    (body,) = BinlogStatement.objects.filter(confidence="unlinked")  # the CALL's routine body
    table = body.changes.get().table
    history = investigator_client.get(f"/tables/{table}/").content.decode()
    assert 'id="unexplained-link"' in history
    listing = investigator_client.get(f"/binlog/unexplained/?server={SERVER}&table={table}").content.decode()
    assert f'href="/binlog/statements/{body.pk}/"' in listing and "routine" in listing
    call = next(e for e in DESTRUCTIVE if e["expect"] == "unlinked")
    assert f'href="/events/{_event(call).pk}/"' in listing  # the CALL it may belong to
    page = investigator_client.get(f"/binlog/statements/{body.pk}/").content.decode()
    assert "no statement explains it" in page
    assert page.count('<tr class="delete">') == call["rows_affected"]
    assert (
        investigator_client.get("/binlog/unexplained/?server=elsewhere")
        .content.decode()
        .count("/binlog/statements/")
        == 0
    )


def _links(server: str) -> dict[tuple[str, int, int], tuple]:
    """The join's answer for each of the server's row statements (by file, position and place),
    with the events named by their rank among the server's events (a copy's ids differ)."""
    rank = {
        pk: n
        for n, pk in enumerate(
            Event.objects.filter(server=server).order_by("id").values_list("id", flat=True)
        )
    }
    answers = BinlogStatement.objects.filter(transaction__server=server).values_list(
        "transaction__file_name",
        "transaction__start",
        "index",
        "event_id",
        "confidence",
        "candidates",
        "reason",
    )
    return {
        (name, start, index): (rank[event] if event is not None else None, confidence,
                               sorted(rank[c] for c in candidates), reason)
        for name, start, index, event, confidence, candidates, reason in answers
    }  # fmt: skip


def test_another_servers_copy_of_the_same_binlog_changes_nothing_in_a_servers_join(scene: None) -> None:
    # Issue 21: the join's windows read their own server's statements only. Another server label
    # with the same binlogs and general log stores rows of the very same seconds.
    alone = _links(SERVER)
    assert any(event is not None for event, *_ in alone.values())  # some links to compare
    out = io.StringIO()
    call_command(
        "ingest", *(str(SCENE / n) for n in _scene_in_this_order()), "--server", "scene-copy", stdout=out
    )
    assert "binlog row statements joined" in out.getvalue()
    assert _links("scene-copy") == alone  # the copy joined to its own events, as the first was
    linked = BinlogStatement.objects.filter(server="scene-copy", event_id__isnull=False)
    copy_events = set(Event.objects.filter(server="scene-copy").values_list("id", flat=True))
    assert set(linked.values_list("event_id", flat=True)) <= copy_events
    # The first server's join again from scratch, with the copy stored: the same answers.
    mine = BinlogStatement.objects.filter(server=SERVER)
    mine.update(event_id=None, confidence="", evidence=[], candidates=[], reason="")
    assert join_binlogs(SERVER) == mine.count()
    assert _links(SERVER) == alone
    # Each statement keeps its transaction's server (the column the windows' index leads with).
    assert not BinlogStatement.objects.exclude(server=F("transaction__server")).exists()
