"""Oracle events in Debian's Chromium: the explorer narrowed to the destructive statements of an
Oracle server, and the event page of scott's DELETE with its SCN, transaction and the Flashback
hint. Its screenshots go to the test's temporary folder, or to $AUDITWEB_SCREENSHOTS when set (how
docs/screenshots/oracle-*.png were made; looked at by a person, not compared by the test)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest.models import Event
from tests.fixtures.oracle_scene.scene import ROWS, to_json

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_investigator_reads_an_oracle_delete_with_its_scn_and_transaction(
    visit, ingest_bytes, tmp_path
) -> None:
    shots = Path(os.environ.get("AUDITWEB_SCREENSHOTS") or tmp_path)
    ingest_bytes(to_json(ROWS), name="unified_audit_trail.json", server="orcl1")
    visit.log_in()
    page = visit.page
    page.goto(visit.url + "/events/?server=orcl1&destructive=true")
    visit.settled()
    rows = visit.rows()
    assert "DELETE FROM shop.orders WHERE status = 'OLD'" in rows
    assert 'DROP TABLE "Shop"."Audit Copy" PURGE' in rows
    page.screenshot(path=str(shots / "oracle-explorer.png"), full_page=False)

    delete = Event.objects.get(server="orcl1", statement_type="DELETE", user="SCOTT")
    page.goto(f"{visit.url}/events/{delete.pk}/")
    visit.settled()
    fields = page.inner_text("dl.fields")
    assert "5000123" in fields and "0A001F00A1030000" in fields
    assert "a statement later rolled back is still here" in fields
    page.screenshot(path=str(shots / "oracle-event.png"), full_page=True)
    assert visit.errors == []
