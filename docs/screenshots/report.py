"""Pages of a case report as PNGs, into docs/screenshots/: the summary page, the timeline page and
the first page of the evidence table, of a case made from the crime scene (tests/fixtures/crime_scene/).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/auditweb_shots .venv/bin/python docs/screenshots/report.py

Needs a scratch database (it migrates it and ingests the crime scene's general log into it) and
pdftoppm (poppler-utils). The case pins every destructive statement of bob and mallory (the
culprit of truth.json), with notes, and its PDF is generated as the Reports button does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "screenshots")
os.environ.setdefault("REPORT_DIR", tempfile.mkdtemp(prefix="auditweb-report-shots-"))

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from ingest.models import Event  # noqa: E402
from ingest.pipeline import ingest_file, source_for_path  # noqa: E402
from investigations.cases import case_create, evidence_pin, note_add, saved_filter_add  # noqa: E402
from investigations.reports.generate import report_generate, report_request  # noqa: E402
from investigations.roles import Role, set_role  # noqa: E402

LOG = REPO / "tests/fixtures/crime_scene/mariadb-10.11.19-general.log"
NOTES = {
    "RENAME TABLE orders TO orders_old": "shop.orders renamed first, so that its DROP does not name it",
    "DROP TABLE orders_old": "the orders table, under its new name, dropped",
    "TRUNCATE TABLE mysql.general_log": "anti-forensic: erases the general_log table",
    "DELETE FROM orders WHERE 1=1": "bob empties the table in boot 1 (a WHERE that is always true)",
}


def main() -> int:
    call_command("migrate", verbosity=0)
    if not Event.objects.filter(server="db-prod-1").exists():
        ingest_file(LOG, source=source_for_path(LOG, server="db-prod-1", fmt="general-log", tz="UTC"))
    user, _ = get_user_model().objects.get_or_create(username="ivy")
    set_role(user, Role.INVESTIGATOR)
    case = case_create(
        user=user,
        title="shop.orders dropped and the general log wiped",
        description="On 23 November 2026 the shop's order table disappeared from db-prod-1 and the audit "
        "trail on the server stops shortly after. This report lists the statements that removed or "
        "overwrote data in the window, who ran them from where, and the state of the logs.",
        window_start=datetime(2026, 11, 23, 12, 48, 30, tzinfo=UTC),
        window_end=datetime(2026, 11, 23, 12, 48, 45, tzinfo=UTC),
    )
    culprits = Event.objects.filter(server="db-prod-1", destructive=True, user__in=["mallory", "bob"])
    for event in culprits.order_by("occurred_at"):
        evidence_pin(case=case, event=event, user=user, note=NOTES.get(event.sql, ""))
    note_add(
        case=case,
        user=user,
        text="mallory connected from 127.0.0.1 after the restart (boot 2), renamed shop.orders to orders_old "
        "and dropped it, dropped shop_archive, then switched the general log off and truncated "
        "mysql.general_log.",
    )
    note_add(
        case=case,
        user=user,
        text="The general log has gaps from 12:48:36 (logging switched off, restart) and is still off at "
        "the end: statements in those gaps are not in this log. Compare with the server_audit log.",
    )
    saved_filter_add(case=case, user=user, name="everything mallory did", query="user=mallory")
    # Outside a transaction the row commits at once, so the "worker" (here, this process) runs now.
    report = report_request(case=case, fmt="pdf", user=user, queue=report_generate)
    report.refresh_from_db()
    assert report.status == "done", report.error
    for name, page in (("report-page-1", 1), ("report-timeline", 2), ("report-evidence", 3)):
        prefix = OUT / name
        pages = ["-f", str(page), "-l", str(page), "-singlefile"]
        subprocess.run(["pdftoppm", "-png", "-r", "80", *pages, str(report.path), str(prefix)], check=True)
        print(f"{prefix.relative_to(REPO)}.png  page {page} of {report.path} (SHA-256 {report.sha256})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
