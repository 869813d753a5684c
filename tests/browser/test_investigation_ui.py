"""End to end in Debian's Chromium, driven by Playwright, against a live server over the real
PostgreSQL: an investigator finds who deleted from shop.orders in the bundled scenario.

Skipped, with the reason, where /usr/bin/chromium (apt-get install chromium) or the playwright
package (requirements.lock) is missing. Playwright never downloads a browser here.
"""

from __future__ import annotations

import pytest

from ingest.models import Event
from tests.investigations.logs import SCENARIO
from tests.investigations.test_stored_xss import HOSTILE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_investigator_filters_down_to_the_culprit_and_follows_him_to_his_session(
    visit, ingest_bytes
) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    visit.log_in()
    page = visit.page
    loads = visit.loads
    page.fill("#f-table", "shop.orders")
    page.check("input[name=destructive]")
    page.fill("#f-user", "bob")
    page.press("#f-user", "Enter")
    page.wait_for_url(lambda u: "user=bob" in u and "destructive=true" in u and "table=shop.orders" in u)
    visit.settled()
    assert visit.rows() == ["DELETE FROM orders", "DELETE FROM orders WHERE id = 3"]
    assert visit.loads == loads  # htmx swapped the results: no page load
    assert "2 events match." in page.inner_text("#results")
    explorer = page.url

    page.locator("#event-table td.time a").first.click()
    page.wait_for_url("**/events/*/")
    assert page.inner_text("h1").startswith("DELETE")
    assert "bob@127.0.0.1" in page.inner_text("dl.fields")
    assert "DELETE FROM orders" in page.inner_text("pre.raw")

    page.get_by_role("link", name="The whole session").click()
    page.wait_for_url("**/sessions/*/")
    assert page.inner_text("h1") == "Session of bob@127.0.0.1"
    session = page.inner_text("table.session")
    assert "DROP TABLE scratch" in session and "DELETE FROM orders WHERE id = 3" in session

    page.go_back()
    page.go_back()  # back to the filtered explorer: the form and the results as they were
    page.wait_for_url(explorer)
    visit.settled()
    assert page.input_value("#f-user") == "bob" and page.is_checked("input[name=destructive]")
    assert visit.rows() == ["DELETE FROM orders", "DELETE FROM orders WHERE id = 3"]

    shared = visit.context.new_page()  # the URL, opened afresh, reproduces the view
    shared.goto(explorer)
    shared.wait_for_load_state("networkidle")
    assert shared.input_value("#f-table") == "shop.orders"
    cells = shared.locator("#event-table td.sql").all_inner_texts()
    assert [c.strip() for c in cells] == ["DELETE FROM orders", "DELETE FROM orders WHERE id = 3"]
    assert visit.dialogs == [] and visit.errors == []


def chart_bucket(page, label: str) -> tuple[float, float]:
    """Where on the page the chart's bar for `label` is (its middle)."""
    x, y = page.evaluate(
        """(label) => {
          const chart = document.getElementById('timeline-chart').$chart;
          const i = chart.data.labels.indexOf(label);
          return [chart.scales.x.getPixelForValue(i), (chart.chartArea.top + chart.chartArea.bottom) / 2];
        }""",
        label,
    )
    box = page.locator("#timeline-chart").bounding_box()
    return box["x"] + x, box["y"] + y


def test_clicking_a_bar_narrows_the_time_range_and_the_url_reproduces_it(visit, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    in_second = {
        e.sql for e in Event.objects.filter(tables__contains=["shop.orders"], occurred_at__second=22)
    }  # bob's second, 08:48:22
    visit.log_in()
    page = visit.page
    page.goto(visit.url + "/events/?table=shop.orders&tz=UTC")
    visit.settled()
    labels = page.evaluate("() => document.getElementById('timeline-chart').$chart.data.labels")
    assert "08:48:22" in labels and len(labels) > 1
    page.mouse.click(*chart_bucket(page, "08:48:22"))
    page.wait_for_url(lambda u: "since=" in u and "until=" in u)
    visit.settled()
    query = visit.query()
    assert query["since"] == ["2026-11-22T08:48:22"] and query["until"] == ["2026-11-22T08:48:23"]
    assert page.input_value("#f-since") == "2026-11-22T08:48:22"
    assert set(visit.rows()) == in_second
    assert f"{len(in_second)} events match." in page.inner_text("#results")
    assert visit.errors == []

    narrowed = page.url  # shared: the same events, the same form, a chart of that second
    other = visit.context.new_page()
    other.goto(narrowed)
    other.wait_for_load_state("networkidle")
    assert other.input_value("#f-until") == "2026-11-22T08:48:23"
    cells = other.locator("#event-table td.sql").all_inner_texts()
    assert {c.strip() for c in cells} == in_second


def test_dragging_across_bars_narrows_to_all_of_them(visit, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    visit.log_in()
    page = visit.page
    page.goto(visit.url + "/events/?table=shop.orders&tz=UTC")
    visit.settled()
    page.mouse.move(*chart_bucket(page, "08:48:19"))
    page.mouse.down()
    page.mouse.move(*chart_bucket(page, "08:48:20"), steps=5)
    page.mouse.up()
    page.wait_for_url(lambda u: "since=" in u)
    assert visit.query()["since"] == ["2026-11-22T08:48:19"] and visit.query()["until"] == [
        "2026-11-22T08:48:21"
    ]


def test_the_keyboard_reaches_the_filters_and_the_statement_type_picker(visit, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    visit.log_in()
    page = visit.page
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    page.focus("#f-types summary")
    page.keyboard.press("Enter")  # opens the picker
    page.focus("#f-types input[value='DROP TABLE']")
    page.keyboard.press("Space")
    page.wait_for_url(lambda u: "statement_type=" in u)
    visit.settled()
    assert visit.query()["statement_type"] == ["DROP TABLE"]
    assert visit.rows() == ["DROP TABLE scratch"]
    assert page.inner_text("#f-types .chosen") == "DROP TABLE"


def test_a_stored_attack_in_the_log_shows_as_text_and_runs_nothing(visit, ingest_bytes) -> None:
    ingest_bytes(HOSTILE)
    delete = Event.objects.get(statement_type="DELETE")
    visit.log_in()
    page = visit.page
    for path in ["/", "/events/", f"/events/{delete.pk}/", f"/sessions/{delete.session_id}/", "/sessions/",
                 "/tables/", "/tables/shop.orders/"]:  # fmt: skip
        page.goto(visit.url + path)
        visit.settled()
    page.goto(visit.url + "/events/")
    page.fill("#f-q", "script")  # results and chart swapped in by htmx, hostile text included
    page.wait_for_url(lambda u: "q=script" in u)
    visit.settled()
    page.hover("#timeline-chart")  # the chart's tooltip draws on the canvas
    assert "<script>alert('stored')</script>" in page.inner_text("#results")
    assert visit.dialogs == [] and visit.errors == []  # nothing ran, and nothing even tried
    attacked = [u for u in visit.requests if "/api/v1/events/" in u or "/sources/new/" in u]
    assert attacked == []  # no hx-get/hx-post smuggled in by the log fired
    assert (
        page.evaluate(
            "() => document.querySelectorAll('#results script:not([type=\"application/json\"])').length"
        )
        == 0
    )
