"""Rows from the binary log in the investigator's pages (issue 21, items 3-5), against the binlog
scene's truth: the event page's images side by side, the explorer's Rows column and sort, the
dashboard's largest statements, the table as it was at a time T, and flashback SQL for a case
and for a time range on one table."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from ingest.models import BinlogChange, BinlogStatement, Event
from investigations.models import api_token_create
from investigations.query.binlog_state import decode_cursor, shown_image, table_at
from tests.binlog import test_binlog_scene, test_binlog_store
from tests.binlog.test_binlog_store import DESTRUCTIVE, SERVER, TRUTH, _canon, _event, _ingest, _page

pytestmark = pytest.mark.django_db
scene = test_binlog_store.scene  # the fixtures: the scene ingested, a private MariaDB
private_server = test_binlog_scene.private_server
SURE = [e for e in DESTRUCTIVE if e["expect"] not in ("ambiguous", "unlinked")]
KEYS = {"orders": ["id"], "files": ["id"], "ledger": []}  # the scene's CREATE TABLEs


def _table_of(entry: dict[str, Any]) -> str:
    """The scene's table whose columns the entry's rows have."""
    row = (entry["before"] or entry["after"])[0]
    return next(t for t, rows in TRUTH["initial"].items() if rows and set(rows[0]) == set(row))


def _sent(entry: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(entry["sent_at"]).astimezone(UTC)


def _rows_cell(page: str, event: Event) -> str:
    """The Rows column of the event's line in an explorer page."""
    line = next(tr for tr in page.split("<tr") if f'href="/events/{event.pk}/"' in tr)
    found = re.search(r'<td class="rows num">(.*?)</td>', line, re.S)
    assert found, line
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


# -- the event page -------------------------------------------------------------------------


def test_the_event_page_shows_before_and_after_side_by_side(scene: None, investigator_client: Any) -> None:
    entry = next(e for e in SURE if e["change"] == "update" and e["rows_affected"] == 2)
    section = _page(investigator_client, _event(entry)).split('id="binlog-rows"')[1]
    columns = len(entry["before"][0])
    assert f'<th scope="colgroup" colspan="{columns}" class="image-start">Before</th>' in section
    assert f'<th scope="colgroup" colspan="{columns}" class="image-start">After</th>' in section
    lines = section.split('<tr class="update">')[1:]
    assert len(lines) == entry["rows_affected"]  # one line a row, both images in it
    for line, before, after in zip(lines, entry["before"], entry["after"], strict=True):
        cells = re.findall(r'<td class="mono([^"]*)"[^>]*>(.*?)</td>', line.split("</tr>")[0], re.S)
        assert len(cells) == 2 * columns
        changed = [c for c in before if before[c] != after[c]]
        marked = [i for i, (cls, _) in enumerate(cells) if "changed" in cls]
        names = list(before)
        assert marked == [names.index(c) for c in changed] + [columns + names.index(c) for c in changed]
    assert "Download flashback SQL" in section and "later change" in section
    assert 'id="rows-table-at"' in section


def test_a_deleted_row_has_no_after_image_and_an_inserted_one_no_before(
    scene: None, investigator_client: Any
) -> None:
    deleted = next(e for e in SURE if e["change"] == "delete" and e["rows_affected"] == 2)
    section = _page(investigator_client, _event(deleted)).split('id="binlog-rows"')[1]
    assert section.count("none: the row was deleted") == 2 and "none: the row was inserted" not in section
    inserted = next(e for e in SURE if e["change"] == "insert")
    section = _page(investigator_client, _event(inserted)).split('id="binlog-rows"')[1]
    assert section.count("none: the row was inserted") == 1


# -- the explorer and the API ---------------------------------------------------------------


def test_the_explorer_shows_rows_changed_and_a_mark_for_ambiguous_rows(
    scene: None, investigator_client: Any
) -> None:
    page = investigator_client.get(f"/events/?server={SERVER}&destructive=true").content.decode()
    assert 'href="?server=scene&amp;destructive=true&amp;sort=-rows"' in page  # biggest first
    for entry in DESTRUCTIVE:
        query = {"server": SERVER, "connection_id": entry["connection_id"], "q": entry["sql"]}
        found = investigator_client.get("/events/", query).content.decode()
        shown = _rows_cell(found, _event(entry))
        if entry["expect"] == "ambiguous":
            assert shown == "?"  # never the count, which may be the other account's
        elif entry["expect"] == "unlinked":
            assert shown == "?"  # a CALL: the routine's rows nearby are only possibly its
        else:
            assert shown == str(entry["rows_affected"])


def test_the_explorer_marks_statements_no_binlog_covers(investigator_client: Any) -> None:
    _ingest(*TRUTH["files"]["general_log"])
    page = investigator_client.get(f"/events/?server={SERVER}&destructive=true").content.decode()
    event = _event(SURE[0])
    assert _rows_cell(page, event) == "—"


def test_events_sort_by_rows_in_the_explorer_and_the_api(
    scene: None, investigator_client: Any, api_client: Any
) -> None:
    biggest = max(e["rows_affected"] for e in SURE)
    listed = api_client.get(f"/api/v1/events/?server={SERVER}&sort=-rows&page_size=3").json()["results"]
    assert listed[0]["rows_changed"] == biggest
    counts = [e["rows_changed"] for e in listed if e["rows_changed"]]
    assert counts == sorted(counts, reverse=True)
    ascending = api_client.get(f"/api/v1/events/?server={SERVER}&sort=rows&rows_changed_min=1").json()
    counts = [e["rows_changed"] for e in ascending["results"]]
    assert counts == sorted(counts) and len(counts) == len(SURE)
    page = investigator_client.get(f"/events/?server={SERVER}&sort=-rows").content.decode()
    first = page.split('id="event-table"')[1].split("<tbody>")[1].split("</tr>")[0]
    assert f'<td class="rows num">{biggest}</td>' in first


# -- the dashboard --------------------------------------------------------------------------


def test_the_dashboard_lists_the_largest_destructive_statements_sure_links_only(
    scene: None, investigator_client: Any
) -> None:
    page = investigator_client.get("/?period=all").content.decode()
    listing = page.split('id="largest"')[1].split("</table>")[0]
    shown = [int(n) for n in re.findall(r'#binlog-rows">(\d+)</a>', listing)]
    expected = sorted((e["rows_affected"] for e in SURE), reverse=True)[:10]
    assert shown == expected
    for entry in DESTRUCTIVE:
        if f'href="/events/{_event(entry).pk}/#binlog-rows"' in listing:
            assert entry in SURE  # never an ambiguous one, nor a CALL's routine rows
    ambiguous = BinlogStatement.objects.filter(confidence="ambiguous").count()
    assert ambiguous == len([e for e in DESTRUCTIVE if e["expect"] == "ambiguous"])
    assert f"{ambiguous} row statements of the binary log stored fit several statements" in page


def test_the_dashboards_period_leaves_out_older_statements(scene: None, investigator_client: Any) -> None:
    oldest = min(_sent(e) for e in SURE)
    BinlogStatement.objects.update(time=oldest - timedelta(days=40))
    Event.objects.filter(server=SERVER).update(occurred_at=oldest - timedelta(days=40))
    page = investigator_client.get("/?period=30d").content.decode()
    assert 'id="largest"' not in page and "No destructive statement of the last 30 days" in page


# -- the table as it was at T ---------------------------------------------------------------


def _truth_at(table: str, at: datetime) -> dict[str, dict | None]:
    """From the truth: each row the scene's statements touched, as it was at `at` (to the second)."""
    key = KEYS[table]

    def key_of(row: dict) -> str:
        return repr([row[k] for k in key] if key else sorted(row.items()))

    state = {key_of(r): r for r in TRUTH["initial"][table]}
    touched: set[str] = set()
    for entry in [e for e in DESTRUCTIVE if _table_of(e) == table]:
        olds, news = entry["before"], entry["after"]
        touched |= {key_of(r) for r in olds + news}
        if _sent(entry).replace(microsecond=0) > at:
            continue
        for row in olds:
            state.pop(key_of(row), None)
        for row in news:
            state[key_of(row)] = row
    return {k: state.get(k) for k in touched}


def _built_at(table: str, at: datetime, size: int = 100) -> dict[str, dict | None]:
    key = KEYS[table]
    out: dict[str, dict | None] = {}
    cursor = None
    while True:
        page = table_at(SERVER, f"crime.{table}", at, cursor=cursor, size=size)
        assert not page.stopped and not page.error and page.incomplete_images == 0
        for r in page.rows:
            image = shown_image(r.image)
            if key:
                out[repr([int(r.key[0][1])])] = image
            elif image is not None:
                out[repr(sorted(image.items()))] = image
        if not page.next_cursor:
            return out
        decode_cursor(page.next_cursor)  # a cursor it gave out reads back
        cursor = page.next_cursor


MOMENTS = ["01:22:02", "01:22:03", "01:22:04", "01:22:05", "01:22:06", "01:22:07"]


@pytest.mark.parametrize("table", ["orders", "files", "ledger"])
def test_the_table_at_each_moment_is_the_truths_state_of_the_rows_changed(scene: None, table: str) -> None:
    day = _sent(DESTRUCTIVE[0]).date().isoformat()
    for moment in MOMENTS:
        at = datetime.fromisoformat(f"{day}T{moment}+00:00")
        expected = _truth_at(table, at)
        built = _built_at(table, at, size=2)  # pages of two rows: the paging is exercised too
        if KEYS[table]:
            assert built == expected, moment  # absent rows too (None)
        else:
            # Without a key, an absent row is known only by its image on the other side of T.
            assert built == {k: v for k, v in expected.items() if v}, moment


def test_the_table_at_page_names_who_last_changed_each_row_and_its_limits(
    scene: None, investigator_client: Any
) -> None:
    entry = next(e for e in SURE if e["change"] == "delete" and _table_of(e) == "orders")
    at = _sent(entry).replace(microsecond=0)
    page = investigator_client.get(
        "/binlog/table-at/", {"table": "crime.orders", "at": at.isoformat()}
    ).content.decode()
    assert "Rows no binlog change touched are not known from the binary log" in page
    for name in TRUTH["files"]["binlog"]:
        assert name in page  # built from every file that changed the table
    rows = page.split('id="state-rows"')[1].split("</table>")[0].split("<tr class=")[1:]
    deleted_id = entry["before"][0]["id"]
    line = next(r for r in rows if f'<td class="mono key">{deleted_id}</td>' in r)
    assert line.startswith('"absent"') and f"event {_event(entry).pk}" in line and entry["user"] in line
    assert entry["expect"] in line
    # A row whose last change is ambiguous says so, never one account.
    ambiguous = next(e for e in DESTRUCTIVE if e["expect"] == "ambiguous")
    later = _sent(ambiguous).replace(microsecond=0)
    page = investigator_client.get(
        "/binlog/table-at/", {"table": "crime.orders", "at": later.isoformat()}
    ).content.decode()
    assert "ambiguous</span> one of" in page


def test_the_table_at_page_says_when_no_binlog_changed_the_table(investigator_client: Any) -> None:
    page = investigator_client.get(
        "/binlog/table-at/", {"table": "crime.nothing", "at": "2026-01-01T00:00:00"}
    )
    assert 'id="no-binlog"' in page.content.decode()
    bad = investigator_client.get("/binlog/table-at/", {"table": "crime.orders", "at": "yesterday-ish"})
    assert bad.status_code == 200 and "Give the time as" in bad.content.decode()


def test_a_bad_page_link_of_the_table_at_page_is_refused_plainly(
    scene: None, investigator_client: Any
) -> None:
    answer = investigator_client.get(
        "/binlog/table-at/", {"table": "crime.orders", "at": "2026-11-25T01:22:05+00:00", "cursor": "!!x"}
    )
    assert answer.status_code == 200 and "not one AuditWeb gave out" in answer.content.decode()


def test_the_table_page_links_the_table_at_page_and_offers_a_range_flashback(
    scene: None, investigator_client: Any
) -> None:
    page = investigator_client.get("/tables/crime.orders/").content.decode()
    assert 'id="table-at-link"' in page and "/api/v1/tables/crime.orders/flashback/" in page
    assert "overwrites any later change" in page
    # The form's download, as a browser sends it: the page's zone, a logged-in investigator.
    answer = investigator_client.get(
        "/api/v1/tables/crime.orders/flashback/",
        {"server": SERVER, "since": "2026-11-25T01:22:00", "until": "2026-11-25T01:22:09"},
    )
    assert answer.status_code == 200 and "START TRANSACTION;" in answer.content.decode()
    assert "attachment" in answer["Content-Disposition"]


# -- flashback for a case and for a time range ----------------------------------------------


def _range_sql(
    client: Any, table: str, since: str = "2026-01-01T00:00:00Z", until: str = "2027-01-01T00:00:00Z"
) -> str:
    answer = client.get(f"/api/v1/tables/crime.{table}/flashback/", {"since": since, "until": until})
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain")
    return answer.content.decode()


def test_a_range_flashback_undoes_every_row_change_of_the_table_newest_first(
    scene: None, api_client: Any
) -> None:
    for table in ("orders", "files", "ledger"):
        sql = _range_sql(api_client, table)
        undo = [line for line in sql.splitlines() if line.split(" ", 1)[0] in ("INSERT", "UPDATE", "DELETE")]
        changes = BinlogChange.objects.filter(table=f"crime.{table}")
        assert len(undo) == sum(c.rows for c in changes)  # linked or not: the routine's rows too
        assert all(f"`crime`.`{table}`" in line for line in undo)
        labels = [line for line in sql.splitlines() if line.startswith("-- undo ")]
        positions = [(line.split(" at ")[0], int(line.split(" at ")[1].split(",")[0])) for line in labels]
        assert positions == sorted(positions, reverse=True)  # newest statement first
    # A range that holds nothing changes nothing, and says so.
    empty = _range_sql(api_client, "orders", "2020-01-01T00:00:00Z", "2020-01-02T00:00:00Z")
    assert "nothing to undo" in empty and "INSERT" not in empty.split("START TRANSACTION;")[1]
    assert api_client.get("/api/v1/tables/crime.orders/flashback/?since=x").status_code == 400


def test_range_flashbacks_bring_back_the_initial_state(
    scene: None, api_client: Any, private_server: Any, tmp_path: Path
) -> None:
    from tests.binlog.test_binlog_scene import SCENE, _client, _dump

    # The tables' CREATE TABLE in a log of the server: the flashback then leaves out `total`,
    # a generated column (without one it says so, and the server refuses the script).
    log = tmp_path / "create.log"
    lines = [
        b"Time\t\t    Id Command\tArgument\n",
        b"261124  0:00:00\t   500 Connect\troot@localhost on crime\n",
    ]
    lines += [b"\t\t   500 Query\t" + sql.encode() + b"\n" for sql in TRUTH["create_table"].values()]
    log.write_bytes(b"".join(lines))
    _ingest(str(log))
    _client(private_server, (SCENE / "final.sql").read_bytes())
    for table in ("orders", "files", "ledger"):
        _client(private_server, _range_sql(api_client, table).encode())
    assert _dump(private_server) == {t: _canon(r) for t, r in TRUTH["initial"].items()}


def test_a_range_flashback_of_one_moment_undoes_only_what_committed_then(
    scene: None, api_client: Any
) -> None:
    entry = next(e for e in SURE if e["change"] == "update" and e["rows_affected"] == 2)
    second = _sent(entry).replace(microsecond=0).isoformat()
    sql = _range_sql(api_client, "orders", second, second)
    undo = [line for line in sql.splitlines() if line.startswith("UPDATE")]
    same = [
        e
        for e in DESTRUCTIVE
        if _table_of(e) == "orders" and _sent(e).replace(microsecond=0).isoformat() == second
    ]
    assert len(undo) == sum(len(e["before"]) for e in same if e["change"] == "update")


def test_a_case_flashback_undoes_its_sure_events_and_names_the_ambiguous_ones(
    scene: None, api_client: Any
) -> None:
    case = api_client.post("/api/v1/cases/", {"title": "rows"}, format="json").json()["id"]
    pinned = [e for e in DESTRUCTIVE if e["expect"] in ("unique_text_and_time", "ambiguous")]
    for entry in pinned:
        answer = api_client.post(
            f"/api/v1/cases/{case}/evidence/", {"event": _event(entry).pk}, format="json"
        )
        assert answer.status_code == 201, answer.content
    answer = api_client.get(f"/api/v1/cases/{case}/flashback/")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/plain")
    sql = answer.content.decode()
    undo = [line for line in sql.splitlines() if line.split(" ", 1)[0] in ("INSERT", "UPDATE", "DELETE")]
    sure = [e for e in pinned if e["expect"] == "unique_text_and_time"]
    assert len(undo) == sum(e["rows_affected"] for e in sure)
    labels = [line for line in sql.splitlines() if line.startswith("-- undo ")]
    assert {int(m) for line in labels for m in re.findall(r"event (\d+) \(", line)} == {
        _event(e).pk for e in sure
    }
    left_out = sql.split("Left out:")[1].splitlines()[0]
    assert {int(n) for n in re.findall(r"\d+", left_out)} == {
        _event(e).pk for e in pinned if e["expect"] == "ambiguous"
    }
    assert sql.splitlines()[-1] == "COMMIT;"


def test_the_case_page_offers_the_case_flashback(
    scene: None, investigator_client: Any, api_client: Any
) -> None:
    case = api_client.post("/api/v1/cases/", {"title": "rows"}, format="json").json()["id"]
    api_client.post(f"/api/v1/cases/{case}/evidence/", {"event": _event(SURE[0]).pk}, format="json")
    page = investigator_client.get(f"/cases/{case}/").content.decode()
    assert f'href="/api/v1/cases/{case}/flashback/"' in page and "overwrites any later change" in page


def test_a_siem_token_reaches_neither_flashback(scene: None, investigator: Any, api_client: Any) -> None:
    case = api_client.post("/api/v1/cases/", {"title": "rows"}, format="json").json()["id"]
    siem = APIClient()
    siem.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=investigator, siem=True)[1]}")
    for url in (
        f"/api/v1/cases/{case}/flashback/",
        "/api/v1/tables/crime.orders/flashback/?since=2026-01-01T00:00:00Z&until=2027-01-01T00:00:00Z",
        f"/api/v1/events/{_event(SURE[0]).pk}/flashback/",
    ):
        assert siem.get(url).status_code == 403, url
    assert siem.get(f"/api/v1/events/?server={SERVER}").status_code == 200  # what it may read


# -- case reports ---------------------------------------------------------------------------


@pytest.fixture
def reports(
    scene: None, report_written: Any, investigator: Any, settings: Any, tmp_path: Path, monkeypatch: Any
) -> dict:
    """A case pinning a sure update of two rows, an ambiguous delete and a one-row delete; its
    three reports, with one row per event listed (the rest: the API)."""
    from investigations.cases import case_create, evidence_pin

    settings.REPORT_DIR = tmp_path / "reports"
    monkeypatch.setattr("investigations.reports.content.ROWS_PER_EVENT", 1)
    case = case_create(title="rows", user=investigator)
    chosen = [
        next(e for e in SURE if e["change"] == "update" and e["rows_affected"] == 2),
        next(e for e in DESTRUCTIVE if e["expect"] == "ambiguous"),
        next(e for e in SURE if e["change"] == "delete" and e["rows_affected"] == 1),
    ]
    for entry in chosen:
        evidence_pin(case=case, event=_event(entry), user=investigator, note="")
    out = {"chosen": chosen}
    for fmt in ("json", "csv", "pdf"):
        report = report_written(case, fmt, investigator)
        assert report.status == "done", report.error
        out[fmt] = report.path.read_bytes()
    return out


def test_the_json_report_carries_each_events_rows_bounded_with_the_joins_word(reports: dict) -> None:
    import json

    body = json.loads(reports["json"])
    by_event = {e["event_id"]: e for e in body["evidence"]}
    update, ambiguous, delete = reports["chosen"]
    got = by_event[_event(update).pk]["binlog"]
    assert got["confidence"] == "unique_text_and_time" and got["rows_changed"] == 2 and got["rows_total"] == 2
    assert len(got["rows"]) == 1 and got["rows_not_listed"] == 1
    assert got["rows"][0]["before"] == update["before"][0] and got["rows"][0]["after"] == update["after"][0]
    assert got["rows_note"] == f"1 more rows: see the API, /api/v1/events/{_event(update).pk}/rows/"
    assert got["evidence"]
    got = by_event[_event(ambiguous).pk]["binlog"]
    assert got["confidence"] == "ambiguous" and got["rows_changed"] is None  # never as fact
    got = by_event[_event(delete).pk]["binlog"]
    assert got["rows"] == [
        {"table": got["rows"][0]["table"], "change": "delete", "before": delete["before"][0], "after": None}
    ]
    assert got["rows_not_listed"] == 0 and got["rows_note"] is None


def test_the_csv_report_carries_the_rows_in_columns_of_their_own(reports: dict) -> None:
    import csv
    import io
    import json

    lines = list(csv.DictReader(io.StringIO(reports["csv"].decode("utf-8-sig"))))
    update, ambiguous, _ = reports["chosen"]
    line = next(r for r in lines if r["event_id"] == str(_event(update).pk))
    assert line["rows_changed"] == "2" and line["binlog_confidence"] == "unique_text_and_time"
    assert json.loads(line["binlog_rows"])[0]["after"] == update["after"][0]
    assert "1 more rows: see the API" in line["binlog_rows_more"]
    line = next(r for r in lines if r["event_id"] == str(_event(ambiguous).pk))
    assert line["rows_changed"] == "" and line["binlog_confidence"] == "ambiguous"


def test_the_pdf_report_shows_the_rows_changed_cells_marked(reports: dict, tmp_path: Path) -> None:
    import shutil
    import subprocess

    if not shutil.which("pdftotext"):
        pytest.skip("no pdftotext (poppler-utils) to read the PDF back")
    pdf = Path(os.environ.get("AUDITWEB_SCREENSHOTS") or tmp_path) / "case-rows.pdf"  # to look at
    pdf.write_bytes(reports["pdf"])
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, check=True
    ).stdout.decode()
    update = reports["chosen"][0]
    assert "Rows from the binary log: 2 · linked by unique_text_and_time" in text
    assert "AMBIGUOUS: this statement's or another's, not fact" in text
    changed = next(c for c in update["before"][0] if update["before"][0][c] != update["after"][0][c])
    assert f"* {changed}: {update['before'][0][changed]} -> {update['after'][0][changed]}" in text
    assert f"1 more rows: see the API, /api/v1/events/{_event(update).pk}/rows/" in text


def test_the_table_at_page_keeps_only_a_page_of_rows_however_many_change() -> None:
    """The bound of the table at T: whatever the order rows come in, the page holds at most its
    size plus one, and ends with exactly the smallest keys after the cursor."""
    import random

    from investigations.query.binlog_state import _Page, _part

    keys = [(_part(n),) for n in range(20_000)]
    random.Random(21).shuffle(keys)
    page = _Page(after=(_part(5_000),), size=100)
    most = 0
    for key in keys + keys[:5_000]:  # each row changed again later
        page.get(key)
        most = max(most, len(page.rows))
    assert most == 101
    assert page.keys == [(_part(n),) for n in range(5_001, 5_102)]


def test_a_minimal_update_without_its_key_in_the_after_image_keeps_the_rows_identity() -> None:
    from ingest.binlog.images import RowImage
    from investigations.query.binlog_state import _KeyOf, _part, _split

    key_of = _KeyOf(["id"])
    minimal = RowImage("db.t", "update", {"id": 7}, {"status": "void"}, complete=False)
    assert list(_split(minimal, key_of)) == [((_part(7),), "update", {"id": 7}, {"status": "void"})]
    moved = RowImage("db.t", "update", {"id": 7, "a": 1}, {"id": 8, "a": 1}, complete=True)
    assert [(k, b, a) for k, _, b, a in _split(moved, key_of)] == [
        ((_part(7),), {"id": 7, "a": 1}, None),  # the old key is gone
        ((_part(8),), None, {"id": 8, "a": 1}),  # the new one appears
    ]
