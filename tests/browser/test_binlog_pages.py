"""In Chromium: the binary log's rows where an investigator looks (issue 21): the event page's
images side by side, the explorer's Rows column sorted biggest first, the dashboard's largest
statements and the table as it was at a time. Each page is shot (to $AUDITWEB_SCREENSHOTS when
set, for a person to look at) and must render without a console error.

Skipped, with the reason, where Chromium or playwright is missing (as the other browser tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.binlog.test_binlog_store import DESTRUCTIVE, _event, _ingest, _scene_in_this_order
from tests.browser.conftest import Visit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _shoot(visit: Visit, path: str, name: str, folder: Path) -> None:
    visit.page.goto(visit.url + path)
    visit.settled()
    visit.page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    assert not visit.errors, (path, visit.errors)


def test_the_binlog_pages_render_in_a_browser(visit: Visit, tmp_path: Path) -> None:
    if not DESTRUCTIVE:
        pytest.skip("tests/fixtures/binlog_scene has no truth.json: run regenerate.py")
    _ingest(*_scene_in_this_order())
    folder = Path(os.environ.get("AUDITWEB_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    visit.page.set_viewport_size({"width": 1400, "height": 900})
    visit.log_in()
    update = next(e for e in DESTRUCTIVE if e["change"] == "update" and e["rows_affected"] == 2)
    _shoot(visit, f"/events/{_event(update).pk}/#binlog-rows", "event-rows", folder)
    assert visit.page.locator("#binlog-rows table.binrows td.changed").count() == 2 * 2
    _shoot(visit, "/events/?server=scene&destructive=true&sort=-rows", "explorer-rows", folder)
    first = visit.page.locator("#event-table tbody tr").first.locator("td.rows").inner_text()
    assert first.strip() == str(max(e["rows_affected"] for e in DESTRUCTIVE if e["expect"] != "ambiguous"))
    _shoot(visit, "/?period=all", "dashboard-largest", folder)
    assert visit.page.locator("#largest tbody tr").count() >= 1
    at = update["sent_at"][:19]
    _shoot(visit, f"/binlog/table-at/?table=crime.orders&at={at}", "table-at", folder)
    assert visit.page.locator("#state-rows tbody tr").count() >= 1
