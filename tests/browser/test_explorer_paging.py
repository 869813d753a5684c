"""The explorer in Chromium: "Older →" shows the new page from its top, and typing in the filter
(which cancels the searches it outruns) leaves no error in the console."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLAP = FIXTURES / "genlog" / "mariadb-10.11.19-slap.log"  # 320 events: several pages


def table_top(page) -> float:
    """Where the results table begins, in the viewport (0: at the top edge)."""
    return page.locator("#event-table").bounding_box()["y"]


def test_older_and_newest_show_the_new_page_from_the_top_of_the_table(visit, ingest_bytes) -> None:
    ingest_bytes(SLAP.read_bytes(), server="slap")
    visit.log_in()
    page = visit.page
    page.goto(visit.url + "/events/?tz=UTC")
    visit.settled()
    first_rows = visit.rows()
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    assert table_top(page) < -1000  # the table's top is far above the view: we are at the bottom
    page.get_by_role("link", name="Older →").click()
    page.wait_for_url(lambda u: "cursor=" in u)
    visit.settled()
    assert visit.rows() != first_rows
    assert -2 <= table_top(page) <= 60  # the new page, seen from its first row

    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.get_by_role("link", name="← Newest").click()
    page.wait_for_url(lambda u: "cursor=" not in u)
    visit.settled()
    assert visit.rows() == first_rows
    assert -2 <= table_top(page) <= 60
    assert visit.errors == []


def test_searches_cancelled_by_typing_log_no_console_error(visit, ingest_bytes) -> None:
    ingest_bytes(SLAP.read_bytes(), server="slap")
    visit.log_in()
    page = visit.page
    every_error: list[str] = []  # unlike visit.errors, nothing is excused here
    page.on("console", lambda m: every_error.append(m.text) if m.type == "error" else None)
    page.goto(visit.url + "/events/?tz=UTC")
    visit.settled()
    page.evaluate(
        """() => {
          window.cancelled = 0;
          document.body.addEventListener('htmx:sendAbort', () => { window.cancelled += 1; });
        }"""
    )
    # A search still running when the next starts is cancelled (hx-sync replace): three submits
    # in a row cancel the first two, as fast typing does.
    page.evaluate(
        """() => {
          const form = document.getElementById('filters');
          document.getElementById('f-q').value = 'INSERT';
          form.requestSubmit(); form.requestSubmit(); form.requestSubmit();
        }"""
    )
    page.wait_for_url(lambda u: "q=INSERT" in u)
    visit.settled()
    page.focus("#f-q")
    page.keyboard.press("End")
    page.keyboard.type("INTO", delay=40)
    page.wait_for_url(lambda u: "q=INSERTINTO" in u)
    visit.settled()
    assert page.evaluate("() => window.cancelled") >= 2  # cancellations did happen...
    assert every_error == []  # ...and none was logged as an error
    assert "No event matches" in page.inner_text("#results")
