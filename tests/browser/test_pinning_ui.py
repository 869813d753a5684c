"""In Chromium: the pin popover stays inside the window, beside its button (not over the next
rows' buttons), closes on Escape, on a click outside and once pinned; several events are ticked
(one, then a shift-click for the range between) and pinned to a case in one click of the bar.

And the issue's walk: from the culprit's row to the PDF of his whole session in five clicks.

Skipped, with the reason, where Chromium or playwright is missing (as the other browser tests)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from investigations.cases import case_create
from investigations.models import Evidence, Report
from tests.browser.conftest import Visit
from tests.conftest import FIXTURES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GENERAL_LOG = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"
WIDTH, HEIGHT = 1280, 800  # the Visit's viewport


def inside_window(box: dict[str, float]) -> bool:
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= WIDTH
        and box["y"] + box["height"] <= HEIGHT
    )


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"] or
                a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])  # fmt: skip


def test_the_pin_popover_stays_in_the_window_and_closes_on_escape_and_outside_clicks(
    visit: Visit,
    ingest_bytes,
    investigator,
) -> None:
    ingest_bytes(GENERAL_LOG.read_bytes(), server="db-prod-1", name="general.log")
    case_create(user=investigator, title="shop.orders")
    visit.log_in()
    page = visit.page
    page.goto(visit.url + "/events/?user=bob")
    rows = page.locator("#event-table tbody tr")
    assert rows.count() >= 5
    for index in (0, rows.count() - 1):  # the first row, and the last one at the bottom of the window
        row = rows.nth(index)
        row.scroll_into_view_if_needed()
        summary = row.locator("details.pin-pop summary")
        summary.click()
        pop = row.locator("details.pin-pop .pop")
        pop.locator("form.pin-form").wait_for()
        box = pop.bounding_box()
        assert box is not None and inside_window(box), box
        for other in page.locator("#event-table details.pin-pop summary").all():
            other_box = other.bounding_box()
            if other_box and other_box != summary.bounding_box():
                assert not overlaps(box, other_box), (box, other_box)
        # the keyboard reaches the form at once; Escape closes it and gives the focus back
        assert page.evaluate("document.activeElement.name") == "case"
        page.keyboard.press("Escape")
        assert not row.locator("details.pin-pop").evaluate("d => d.open")
        assert page.evaluate("document.activeElement.tagName") == "SUMMARY"
    first = rows.nth(0).locator("details.pin-pop")
    first.locator("summary").click()
    first.locator("form.pin-form").wait_for()
    page.locator("h1").click()  # outside
    assert not first.evaluate("d => d.open")
    # one popover at a time
    first.locator("summary").click()
    rows.nth(1).locator("details.pin-pop summary").click()
    assert not first.evaluate("d => d.open")
    assert visit.errors == []


def test_several_events_are_ticked_and_pinned_to_a_case_in_one_click(
    visit: Visit,
    ingest_bytes,
    investigator,
    tmp_path,
) -> None:
    ingest_bytes(GENERAL_LOG.read_bytes(), server="db-prod-1", name="general.log")
    case = case_create(user=investigator, title="bob's session")
    visit.log_in()
    page = visit.page
    page.goto(visit.url + "/events/?user=bob")
    bar = page.locator("#select-bar")
    assert not bar.is_visible()  # nothing ticked: no bar in the way
    ticks = page.locator('#event-table input[form="pin-selected"]')
    ticks.nth(1).click()
    ticks.nth(4).click(modifiers=["Shift"])  # the range between
    assert [ticks.nth(i).is_checked() for i in range(6)] == [False, True, True, True, True, False]
    assert bar.is_visible()
    button = bar.get_by_role("button", name="Pin 4 selected")
    assert bar.locator("select[name=case]").input_value() == str(case.pk)
    assert not bar.locator("input[name=title]").is_visible()  # only for a new case
    ids = [int(ticks.nth(i).get_attribute("value")) for i in range(1, 5)]
    loads = visit.loads
    button.click()
    bar.locator("#pin-selected-result p.pinned").wait_for()
    assert "Pinned 4 events to" in bar.inner_text()
    assert sorted(Evidence.objects.filter(case=case).values_list("event_id", flat=True)) == sorted(ids)
    rows = page.locator("#event-table tbody tr")
    for i in range(1, 5):
        assert rows.nth(i).locator("a.pin-mark").inner_text() == f"pinned #{case.pk}"
    assert rows.nth(0).locator("a.pin-mark").count() == 0
    assert not any(t.is_checked() for t in ticks.all())  # cleared for the next selection
    assert visit.loads == loads  # in place
    page.screenshot(path=str(tmp_path / "pinned.png"))

    page.locator("#event-table input.select-all").click()
    assert all(t.is_checked() for t in ticks.all())
    assert bar.get_by_role("button", name=f"Pin {ticks.count()} selected").is_visible()
    bar.locator("select[name=case]").select_option("new")
    bar.locator("input[name=title]").fill("everything bob did")
    bar.get_by_role("button", name=f"Pin {ticks.count()} selected").click()
    bar.locator("#pin-selected-result p.pinned").wait_for()
    assert f"Pinned {ticks.count()} events to" in bar.inner_text()
    assert rows.nth(1).locator("a.pin-mark").count() == 2  # in both cases now
    assert visit.errors == []


def test_from_the_culprit_to_the_pdf_of_his_whole_session_in_five_clicks(
    visit: Visit,
    ingest_bytes,
    investigator,
    settings,
    tmp_path,
    celery_eager,
) -> None:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    settings.REPORT_DIR = tmp_path / "reports"
    ingest_bytes(GENERAL_LOG.read_bytes(), server="db-prod-1", name="general.log")
    case = case_create(user=investigator, title="Who wiped shop.orders?")
    visit.log_in()
    page = visit.page
    page.goto(visit.url + "/events/?user=bob&destructive=true&q=WHERE+1%3D1")  # the answer
    culprit = page.locator("#event-table tbody tr", has_text="DELETE FROM orders WHERE 1=1")
    culprit.locator("a.conn").click()  # 1: his session
    page.wait_for_url("**/sessions/*/")
    statements = page.locator("table.session input[form=pin-selected]").count()
    page.locator("table.session input.select-all").click()  # 2: every statement of it
    page.locator("#select-bar").get_by_role("button", name=f"Pin {statements} selected").click()  # 3
    page.get_by_role("button", name=f"PDF report of case #{case.pk}").click()  # 4
    page.wait_for_url(f"**/cases/{case.pk}/#reports")
    with page.expect_download() as waiting:
        page.locator("#report-list").get_by_role("link", name="Download").click()  # 5
    path = tmp_path / "report.pdf"
    waiting.value.save_as(path)
    assert case.evidence.count() == statements and Report.objects.get(case=case).status == "done"
    text = subprocess.run(
        ["pdftotext", "-layout", str(path), "-"], capture_output=True, check=True
    ).stdout.decode()
    assert "DELETE FROM orders WHERE 1=1" in text and "bob@127.0.0.1" in text
    assert visit.errors == []
