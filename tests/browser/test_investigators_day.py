"""Issue 19's acceptance walk, in Chromium on the demo's own data (loaded as `./dev demo` loads
it): the investigator asks the explorer who deleted rows of shop.orders on the rotated server,
opens the culprit's session, ticks its statements, pins them to a new case, makes the PDF from
the bar and downloads it, in at most five clicks from the answer to the download; the bytes'
SHA-256 is the one AuditWeb shows and stores, and verify_evidence accepts the file.

Skipped, with the reason, where Chromium, playwright or pdftotext is missing."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from devtools.demo import sample_logs, seed_silent
from ingest.follow import ingest_source
from ingest.models import Event, Source
from investigations.management.commands.demo_setup import CASE_OWNER, ROTATED, SILENT
from investigations.models import Case, Report
from investigations.roles import Role, set_role
from tests.browser.conftest import Visit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MAX_CLICKS = 5  # the promise: from the answer to the download
# Counted by the page itself: every trusted click the browser delivers, kept across page loads.
COUNT_CLICKS = """
addEventListener("click", (e) => {
  if (!e.isTrusted) return;
  sessionStorage.setItem("clicks", String(Number(sessionStorage.getItem("clicks") || 0) + 1));
}, true);
"""


class Clicks:
    """Every click of the walk goes through here, so the walk can be held to its count."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, locator, **kwargs) -> None:
        self.count += 1
        locator.click(**kwargs)


@pytest.fixture
def demo(tmp_path, settings, django_user_model, celery_eager) -> str:
    """The demo's servers as `./dev demo` loads them: its sample logs through `manage.py ingest`,
    demo-silent's followed log delivered once, and `demo_setup`'s sources and case (its report
    written at once). Returns the culprit the demo's case names."""
    settings.REPORT_DIR = tmp_path / "reports"
    quiet = io.StringIO()
    for _, server, files in sample_logs():
        assert files, f"no sample logs for {server}"
        call_command("ingest", *files, "--server", server, stdout=quiet)
    followed = tmp_path / "followed"
    seed_silent(followed)
    owner = django_user_model.objects.create_user(CASE_OWNER)
    set_role(owner, Role.INVESTIGATOR)
    call_command("demo_setup", "--followed", str(followed), stdout=quiet)
    ingest_source(Source.objects.get(server=SILENT).pk)  # as the worker does a moment later
    case = Case.objects.get(title__startswith=f"Who deleted orders on {ROTATED}?")
    assert Report.objects.get(case=case).status == "done"
    culprit = case.title.rsplit("(", 1)[1].rstrip(")")
    assert Event.objects.filter(server=SILENT, tables__contains=["shop.orders"]).exists()
    return culprit


def test_the_investigators_day_from_the_answer_to_a_verified_pdf_in_five_clicks(
    visit: Visit,
    demo: str,
    tmp_path: Path,
) -> None:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    culprit = demo
    visit.context.add_init_script(COUNT_CLICKS)
    click = Clicks()
    visit.log_in()
    page = visit.page

    # The question, typed into the explorer: destructive statements on shop.orders of that server.
    page.fill("#f-server", ROTATED)
    page.fill("#f-table", "shop.orders")
    click(page.locator("input[name=destructive]"))
    page.wait_for_url(lambda u: "destructive=true" in u and "table=shop.orders" in u and ROTATED in u)
    visit.settled()
    rows = page.locator("#event-table tbody tr")
    who = rows.locator("td.account").all_inner_texts()
    assert who and sum(culprit in w for w in who) >= 3, who  # the answer: the culprit, again and again
    answer = rows.filter(has_text=culprit).filter(has_text="DELETE FROM orders").first
    answer.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "1-answer.png"))

    # From the answer on, every click counts.
    click.count = 0
    page.evaluate("sessionStorage.setItem('clicks', '0')")
    click(answer.locator("a.conn"))  # 1: the culprit's session
    page.wait_for_url("**/sessions/*/")
    assert culprit in page.locator("h1").inner_text() + page.locator("main").inner_text()[:400]
    ticks = page.locator("table.session input[form=pin-selected]")
    statements = ticks.count()
    assert statements >= 5
    click(page.locator("table.session input.select-all"))  # 2: every statement of the session
    assert all(t.is_checked() for t in ticks.all())
    bar = page.locator("#select-bar")
    assert bar.locator("select[name=case]").input_value() == "new"  # no open case of hers yet
    bar.locator("input[name=title]").fill(f"{culprit} deleted orders on {ROTATED}")
    page.screenshot(path=str(tmp_path / "2-session-ticked.png"))
    click(bar.get_by_role("button", name=f"Pin {statements} selected"))  # 3
    bar.locator("#pin-selected-result p.pinned").wait_for()
    case = Case.objects.get(title=f"{culprit} deleted orders on {ROTATED}")
    assert case.evidence.count() == statements
    # each ticked row now shows its pin to the new case, beside any older case's (the demo's own)
    ticked = page.locator("table.session tbody tr").filter(has=page.locator("input[form=pin-selected]"))
    assert ticked.count() == statements
    for row in ticked.all():
        assert f"pinned #{case.pk}" in row.locator("a.pin-mark").all_inner_texts()
    assert not any(t.is_checked() for t in ticks.all())
    page.screenshot(path=str(tmp_path / "3-pinned.png"))
    click(bar.get_by_role("button", name=f"PDF report of case #{case.pk}"))  # 4
    page.wait_for_url(f"**/cases/{case.pk}/#reports")
    report = Report.objects.get(case=case)
    assert report.status == "done", report.error
    shown = page.locator("#report-list td.hash").first.inner_text().strip()
    with page.expect_download() as waiting:
        click(page.locator("#report-list").get_by_role("link", name="Download"))  # 5
    path = tmp_path / "report.pdf"
    waiting.value.save_as(path)

    assert click.count <= MAX_CLICKS
    assert int(page.evaluate("sessionStorage.getItem('clicks')")) == click.count  # no click uncounted
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == report.sha256 == shown
    out = io.StringIO()
    call_command("verify_evidence", "--report", str(path), "--json", stdout=out)  # raises when altered
    checked = json.loads(out.getvalue())
    assert checked["intact"] and checked["checked"] == {"reports": 1}
    found = [f["message"] for f in checked["findings"] if f["status"] == "ok" and f["what"] == "report"]
    assert len(found) == 1 and f"is report #{report.pk} (pdf) of case #{case.pk}" in found[0], checked
    first_page = subprocess.run(
        ["pdftotext", "-layout", "-f", "1", "-l", "1", str(path), "-"], capture_output=True, check=True
    ).stdout.decode()
    host = Event.objects.filter(server=ROTATED, user=culprit).values_list("host", flat=True).first()
    summary = " ".join(first_page.split())  # the summary names the culprit's account, from the pins
    assert f"by 1 account: {culprit}@{host}." in summary and "DELETE 5 (5 destructive)" in summary
    assert visit.errors == []
