"""Case reports: PDF (read back with pdftotext), CSV (formulas neutralised) and JSON (the
manifest), their stored SHA-256, downloads, and what a report says of evidence that changed."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.urls import reverse

from ingest.models import Event, Gap, IngestRun, SourceFile
from investigations.cases import case_create, evidence_pin, note_add
from investigations.models import Report
from investigations.reports.generate import report_generate, report_request
from investigations.roles import Role, set_role
from tests.conftest import FIXTURES
from tests.investigations.cases_data import CULPRIT_SQL, FORMULA_SQL, HOSTILE_SQL, story

pytestmark = pytest.mark.django_db

CRIME_SCENE = FIXTURES / "crime_scene"
needs_pdftotext = pytest.mark.skipif(
    shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed"
)


@pytest.fixture(autouse=True)
def report_dir(tmp_path, settings):
    settings.REPORT_DIR = tmp_path / "reports"
    return settings.REPORT_DIR


def pdf_text(path: Path) -> str:
    out = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, check=True)
    return out.stdout.decode()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def story_case(ingest_bytes, investigator):
    ingest_bytes(story(), server="db1")
    case = case_create(user=investigator, title="Who wiped shop.orders?")
    for event in Event.objects.filter(user__isnull=False, command="Query").order_by("occurred_at"):
        evidence_pin(
            case=case, event=event, user=investigator, note="-1+2 said the note" if "=" in event.sql else ""
        )
    note_add(case=case, user=investigator, text="bob deleted the old orders, then dropped the archive.")
    return case


@pytest.fixture
def crime_scene_case(investigator):
    """The crime scene's general log, with mallory's destructive statements pinned."""
    from ingest.pipeline import ingest_file, source_for_path

    path = CRIME_SCENE / "mariadb-10.11.19-general.log"
    ingest_file(path, source=source_for_path(path, server="db-prod-1", fmt="auto", tz="UTC"), fmt="auto")
    case = case_create(user=investigator, title="shop.orders is gone")
    for event in Event.objects.filter(user="mallory", destructive=True).order_by("occurred_at"):
        evidence_pin(case=case, event=event, user=investigator, note="mallory at work")
    return case


@needs_pdftotext
def test_the_pdf_names_the_culprit_the_statement_and_the_source_files_hash(
    report_written, crime_scene_case, investigator
):
    truth = json.loads((CRIME_SCENE / "truth.json").read_text())
    drop = next(e for e in truth["entries"] if e.get("sql") == "DROP TABLE orders_old")
    report = report_written(crime_scene_case, "pdf", investigator)
    assert report.status == "done" and report.path.read_bytes().startswith(b"%PDF-")
    text = pdf_text(report.path)
    source = SourceFile.objects.get(path__endswith="mariadb-10.11.19-general.log")
    assert source.sha256 and source.sha256 in text.replace("\n", " ")
    assert f"{drop['user']}@{drop['host']}" in text  # mallory@127.0.0.1
    assert drop["sql"] in text
    assert "RENAME TABLE orders TO orders_old" in text
    assert "Chain of custody" in text and f"Report #{report.pk} of case #{crime_scene_case.pk}" in text
    pages = text.count("\f")
    assert f"Page 1 of {pages}" in text and f"Page {pages} of {pages}" in text
    # Gaps over the case's window: mallory switched the general log off at the end.
    assert "logging switched off" in text


def test_the_reports_sha256_and_size_are_stored(report_written, story_case, investigator):
    for fmt in ("pdf", "csv", "json"):
        report = report_written(story_case, fmt, investigator)
        assert report.status == "done", report.error
        assert report.path.name == f"report-{report.pk}.{fmt}"
        assert (report.sha256, report.size) == (sha256(report.path), report.path.stat().st_size)
        assert report.total == report.progress == story_case.evidence.count()
        assert report.generated_at is not None


def test_the_csv_neutralises_formulas_in_statements_names_and_notes(
    report_written, ingest_bytes, investigator
):
    from tests.investigations.cases_data import T0
    from tests.investigations.logs import genlog

    ingest_bytes(
        genlog(
            (T0, 9, "Connect", "@evil@=cmd|calc on shop using TCP/IP"),
            (T0, 9, "Query", FORMULA_SQL),
            (T0, 9, "Query", "\tSELECT 1"),
        )
    )
    case = case_create(user=investigator, title="=1+1")
    for event in Event.objects.filter(command="Query").order_by("id"):
        evidence_pin(case=case, event=event, user=investigator, note="+SUM(A1:A9)")
    report = report_written(case, "csv", investigator)
    rows = list(csv.DictReader(io.StringIO(report.path.read_text(encoding="utf-8-sig"))))
    assert [r["sql"] for r in rows] == ["'" + FORMULA_SQL, "'\tSELECT 1"]
    assert all(r["note"] == "'+SUM(A1:A9)" for r in rows)
    stored = Event.objects.filter(command="Query").first()
    assert rows[0]["user"] == ("'" + stored.user if stored.user[0] in "=+-@" else stored.user)
    assert rows[0]["host"] == ("'" + stored.host if stored.host[0] in "=+-@" else stored.host)
    assert any(r["user"].startswith("'") or r["host"].startswith("'") for r in rows)
    for row in rows:
        assert not any(str(v).startswith(("=", "+", "-", "@", "\t", "\r")) for v in row.values())


def test_the_csv_has_one_row_per_evidence_event_with_its_provenance(report_written, story_case, investigator):
    report = report_written(story_case, "csv", investigator)
    rows = list(csv.DictReader(io.StringIO(report.path.read_text(encoding="utf-8-sig"))))
    assert len(rows) == story_case.evidence.count()
    culprit = Event.objects.get(sql=CULPRIT_SQL)
    row = next(r for r in rows if r["event_id"] == str(culprit.pk))
    assert (row["user"], row["host"], row["sql"], row["destructive"]) == (
        "bob",
        "10.0.0.9",
        CULPRIT_SQL,
        "yes",
    )
    assert row["source_file_sha256"] == culprit.source_file.sha256
    assert (row["source_line"], row["source_offset"]) == (str(culprit.line), str(culprit.byte_offset))
    assert row["record_hash"] == bytes(culprit.record_hash).hex() and row["integrity"] == "as pinned"
    assert [r["number"] for r in rows] == [str(n) for n in range(1, len(rows) + 1)]


def test_the_json_report_carries_the_manifest(report_written, story_case, investigator):
    started = Event.objects.get(sql=CULPRIT_SQL).occurred_at
    Gap.objects.create(
        server="db1", reason=Gap.Reason.LOGGING_OFF, started_at=started,
        ended_at=None, detail="SET GLOBAL general_log = OFF", source_file=SourceFile.objects.get(), line=3,
        byte_offset=100,
    )  # fmt: skip
    report = report_written(story_case, "json", investigator)
    data = json.loads(report.path.read_bytes())
    assert data["report"]["generated_by"] == "ivy" and data["report"]["id"] == report.pk
    assert data["case"]["title"] == "Who wiped shop.orders?" and data["case"]["investigators"] == ["ivy"]
    culprit = Event.objects.get(sql=CULPRIT_SQL)
    entry = next(e for e in data["evidence"] if e["event_id"] == culprit.pk)
    assert entry["record_hash"] == entry["pinned"]["record_hash"] == bytes(culprit.record_hash).hex()
    assert entry["source"] == {
        "file_id": culprit.source_file_id, "file": culprit.source_file.path, "line": culprit.line,
        "offset": culprit.byte_offset, "file_sha256": culprit.source_file.sha256,
        "file_size": culprit.source_file.size,
    }  # fmt: skip
    assert entry["user"] == "bob" and entry["sql"] == CULPRIT_SQL and entry["integrity"] == "as pinned"
    hostile = next(e for e in data["evidence"] if e["sql"] == HOSTILE_SQL)
    assert hostile["sql"] == HOSTILE_SQL  # JSON keeps the text exactly; escaping is JSON's own
    assert [n["text"] for n in data["notes"]] == ["bob deleted the old orders, then dropped the archive."]
    assert [g["detail"] for g in data["gaps"]["listed"]] == ["SET GLOBAL general_log = OFF"]
    files = data["chain_of_custody"]["source_files"]["listed"]
    assert [(f["path"], f["sha256"]) for f in files] == [
        (culprit.source_file.path, culprit.source_file.sha256)
    ]
    runs = data["chain_of_custody"]["ingest_runs"]["listed"]
    assert [r["id"] for r in runs] == list(IngestRun.objects.values_list("id", flat=True))


@needs_pdftotext
def test_hostile_text_is_shown_escaped_in_the_pdf(report_written, story_case, investigator):
    report = report_written(story_case, "pdf", investigator)
    text = pdf_text(report.path)
    assert "'<b>bold</b> & </para>'" in text  # markup in a statement is text, not markup
    assert "nul\\x01byte" in text and "\\u{202e}evil" in text  # invisible characters are made visible
    assert FORMULA_SQL in text


@needs_pdftotext
def test_a_very_long_statement_is_wrapped_and_its_cut_said(report_written, ingest_bytes, investigator):
    from tests.investigations.cases_data import T0
    from tests.investigations.logs import genlog

    long_sql = "DELETE FROM orders WHERE id IN (" + ",".join(str(n) for n in range(12_000)) + ")"
    ingest_bytes(genlog((T0, 3, "Connect", "bob@h on shop using TCP/IP"), (T0, 3, "Query", long_sql)))
    case = case_create(user=investigator, title="Long")
    evidence_pin(case=case, event=Event.objects.get(command="Query"), user=investigator)
    report = report_written(case, "pdf", investigator)
    assert report.status == "done", report.error
    text = pdf_text(report.path)
    assert f"{len(long_sql) - 20_000:,} more characters" in text
    shown = text.replace("\n", "").replace(" ", "")
    assert all(f",{n}," in shown for n in (10, 1500, 3000, 4000)) and "11999)" not in shown


@needs_pdftotext
def test_a_stored_event_changed_or_gone_since_pinning_is_reported(report_written, story_case, investigator):
    culprit = Event.objects.get(sql=CULPRIT_SQL)
    dropped = Event.objects.get(statement_type="DROP TABLE")
    Event.objects.filter(pk=culprit.pk).update(record_hash=b"\x00" * 16, sql="SELECT 1")
    Event.objects.filter(pk=dropped.pk).delete()
    for fmt in ("json", "pdf"):
        report = report_written(story_case, fmt, investigator)
        if fmt == "json":
            data = json.loads(report.path.read_bytes())
            states = {e["event_id"]: e["integrity"] for e in data["evidence"]}
            assert (
                states[culprit.pk] == "changed since pinned"
                and states[dropped.pk] == "missing from the store"
            )
        else:
            text = pdf_text(report.path).replace("\n", " ")
            assert "CHANGED SINCE PINNED" in text and f"MISSING: event {dropped.pk}" in text


def test_a_report_is_queued_on_commit_then_written_by_the_task(
    story_case, investigator, django_capture_on_commit_callbacks, report_dir
):
    from investigations.tasks import generate_report

    queued: list[int] = []
    with django_capture_on_commit_callbacks() as callbacks:
        report = report_request(case=story_case, fmt="pdf", user=investigator, queue=queued.append)
        assert queued == []  # nothing is sent before the row is committed
    report.refresh_from_db()
    assert report.status == "queued" and report.sha256 == "" and report.path is None
    assert not Path(report_dir).exists()  # nothing written in the request
    for callback in callbacks:
        callback()
    assert queued == [report.pk]
    generate_report(report.pk)  # the Celery task's own function, as a worker runs it
    report.refresh_from_db()
    assert report.status == "done" and report.progress == report.total == story_case.evidence.count()
    assert report.sha256 == sha256(report.path)
    assert report_generate(report.pk) is None  # claimed once: a second delivery does nothing


def test_the_case_page_answers_at_once_with_the_report_queued(
    investigator_client, story_case, django_capture_on_commit_callbacks, celery_eager
):
    with django_capture_on_commit_callbacks() as callbacks:
        answer = investigator_client.post(reverse("case-report", args=[story_case.pk]), {"format": "pdf"})
    assert answer.status_code == 302 and len(callbacks) == 1
    report = Report.objects.get(case=story_case)
    assert report.status == "queued" and report.sha256 == "" and report.path is None
    # Without JavaScript, a reload shows it queued; with htmx, the list asks again every second.
    page = investigator_client.get(reverse("case-detail", args=[story_case.pk])).content.decode()
    assert "queued" in page and 'hx-trigger="every 1s"' in page
    assert reverse("report-download", args=[report.pk]) not in page
    callbacks[0]()  # the commit: the task is sent (run here, eagerly, as a worker would)
    report.refresh_from_db()
    assert report.status == "done" and report.sha256 == sha256(report.path)
    page = investigator_client.get(reverse("case-detail", args=[story_case.pk])).content.decode()
    assert report.sha256 in page and 'hx-trigger="every 1s"' not in page


def test_the_case_page_generates_and_downloads_a_report(
    investigator_client, story_case, django_user_model, django_capture_on_commit_callbacks, celery_eager
):
    with django_capture_on_commit_callbacks(execute=True):
        answer = investigator_client.post(reverse("case-report", args=[story_case.pk]), {"format": "csv"})
    assert answer.status_code == 302
    report = Report.objects.get(case=story_case)
    page = investigator_client.get(reverse("case-detail", args=[story_case.pk])).content.decode()
    assert report.sha256 in page and reverse("report-download", args=[report.pk]) in page
    download = investigator_client.get(reverse("report-download", args=[report.pk]))
    body = b"".join(download.streaming_content)
    assert hashlib.sha256(body).hexdigest() == report.sha256 == download["X-Content-SHA256"]
    assert download["Content-Type"].startswith("text/csv")
    assert f"auditweb-case-{story_case.pk}-report-{report.pk}.csv" in download["Content-Disposition"]

    viewer = django_user_model.objects.create_user("vic")
    set_role(viewer, Role.VIEWER)
    investigator_client.force_login(viewer)
    assert investigator_client.get(reverse("report-download", args=[report.pk])).status_code == 403


def test_a_running_report_shows_its_progress_and_is_polled(investigator_client, story_case, investigator):
    report = Report.objects.create(case=story_case, format="pdf", generated_by=investigator, total=10_000)
    Report.objects.filter(pk=report.pk).update(status="running", progress=2_400)
    part = investigator_client.get(
        reverse("case-detail", args=[story_case.pk]) + "?part=reports", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'hx-trigger="every 1s"' in part and '<progress max="10000" value="2400"' in part
    assert "2,400 of 10,000 events" in part and "<html" not in part


def test_generating_and_downloading_a_report_is_in_the_audit_trail(
    investigator_client, story_case, django_capture_on_commit_callbacks, celery_eager
):
    from investigations.trail import Action, AuditRecord

    with django_capture_on_commit_callbacks(execute=True):
        investigator_client.post(reverse("case-report", args=[story_case.pk]), {"format": "pdf"})
    report = Report.objects.get(case=story_case)
    b"".join(investigator_client.get(reverse("report-download", args=[report.pk])).streaming_content)
    made, fetched = (
        AuditRecord.objects.get(action=a) for a in (Action.REPORT_CREATE, Action.REPORT_DOWNLOAD)
    )
    assert made.username == fetched.username == "ivy"
    # Asked for, the report was queued: its hash is in the download's record.
    assert made.details == {"case": story_case.pk, "report": report.pk, "format": "pdf", "status": "queued",
                            "sha256": ""}  # fmt: skip
    assert fetched.details["report"] == report.pk and fetched.details["sha256"] == report.sha256
