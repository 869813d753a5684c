"""In Chromium: an investigator pins mallory's DROP TABLE from the explorer into a new case and
downloads the case's PDF report, which names mallory and the statement.

Skipped, with the reason, where Chromium, playwright or pdftotext is missing (as the other
browser tests)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from investigations.models import Case
from tests.browser.conftest import Visit
from tests.conftest import FIXTURES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GENERAL_LOG = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"


def test_an_event_is_pinned_from_the_explorer_into_a_new_case_and_its_pdf_downloaded(
    visit: Visit,
    ingest_bytes,
    settings,
    tmp_path,
    celery_eager,
) -> None:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    settings.REPORT_DIR = tmp_path / "reports"
    ingest_bytes(GENERAL_LOG.read_bytes(), server="db-prod-1", name="general.log")
    visit.log_in()
    page = visit.page
    page.goto(visit.url + "/events/?user=mallory&destructive=true")
    row = page.locator("#event-table tr", has_text="DROP TABLE orders_old")
    row.locator("details.pin-pop summary").click()
    form = row.locator("form.pin-form")
    form.wait_for()  # htmx fetched the pin form into the popover
    assert form.locator("select[name=case]").input_value() == "new"  # no case yet: a new one
    form.locator("input[name=title]").fill("shop.orders is gone")
    form.locator("textarea[name=note]").fill("the renamed orders table dropped")
    loads = visit.loads
    form.get_by_role("button", name="Pin").click()
    done = row.locator("a.pin-mark")
    done.wait_for()  # the row shows it pinned, and the popover closed
    case = Case.objects.get(title="shop.orders is gone")
    assert done.inner_text() == f"pinned #{case.pk}"
    assert page.locator("#sel-case").input_value() == str(case.pk)  # the "pin selected" bar offers it next
    assert not row.locator("details.pin-pop").evaluate("d => d.open")
    assert visit.loads == loads  # pinned in place: the explorer stayed where it was
    pin = case.evidence.get()
    assert pin.note == "the renamed orders table dropped" and pin.event.sql == "DROP TABLE orders_old"

    done.click()
    page.wait_for_url(f"**/cases/{case.pk}/#evidence")
    assert "DROP TABLE orders_old" in page.inner_text("#evidence")
    # The report is queued on commit; the task runs there and then (eagerly), as a worker would.
    page.get_by_role("button", name="PDF report").click()
    page.wait_for_url(f"**/cases/{case.pk}/#reports")
    with page.expect_download() as waiting:
        page.locator("#report-list").get_by_role("link", name="Download").click()
    download = waiting.value
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    assert download.suggested_filename == f"auditweb-case-{case.pk}-report-{case.reports.get().pk}.pdf"
    assert path.read_bytes().startswith(b"%PDF-")
    text = subprocess.run(
        ["pdftotext", "-layout", str(path), "-"], capture_output=True, check=True
    ).stdout.decode()
    assert "mallory@127.0.0.1" in text and "DROP TABLE orders_old" in text
    assert case.reports.get().sha256 in page.inner_text("#report-list")
    assert visit.errors == []
