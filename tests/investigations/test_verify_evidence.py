"""verify_evidence --case and --report: a case's pinned events and report files, and a report
file handed over, checked against the store, its chain and the original log."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from ingest.models import Event
from ingest.pipeline import ingest_file, source_for_path
from investigations.cases import case_create, evidence_pin
from investigations.models import Case, Report
from tests.conftest import FIXTURES

pytestmark = pytest.mark.django_db

CRIME_SCENE = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"


def verify(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("verify_evidence", *args, stdout=out)
    except CommandError as e:
        return e.returncode, out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "general.log"
    shutil.copyfile(CRIME_SCENE, path)
    ingest_file(
        path, source=source_for_path(path, server="db1", fmt="general-log", tz="UTC"), fmt="general-log"
    )
    return path


@pytest.fixture
def case(report_written, log, investigator, settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.REPORT_DIR = tmp_path / "reports"
    case = case_create(user=investigator, title="Who wiped shop.orders?")
    for event in Event.objects.filter(destructive=True).order_by("id")[:3]:
        evidence_pin(case=case, event=event, user=investigator, note="")
    for fmt in ("json", "csv", "pdf"):
        report_written(case, fmt, investigator)
    assert Report.objects.filter(case=case, status=Report.Status.DONE).count() == 3
    return case


def pinned(case: Case) -> list[Event]:
    return list(Event.objects.filter(pk__in=case.evidence.values("event_id")).order_by("id"))


def test_an_untouched_case_and_its_reports_verify(case) -> None:  # type: ignore[no-untyped-def]
    status, out = verify("--case", str(case.pk))
    assert status == 0, out
    assert f"the 3 event(s) pinned to case #{case.pk} 'Who wiped shop.orders?' are as they were pinned" in out
    assert "3 event(s) match their bytes in" in out
    assert out.count("has the SHA-256 stored") == 3
    assert "ALTERED" not in out and "NOT CHECKED" not in out


def test_a_pinned_event_edited_in_the_store_is_found(case) -> None:  # type: ignore[no-untyped-def]
    victim = pinned(case)[1]
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE ingest_event SET sql = 'SELECT 1', \"user\" = 'nobody' WHERE id = %s", [victim.pk]
        )
    status, out = verify("--case", str(case.pk))
    assert status == 1
    assert "1 stored event(s) differ from how they were written" in out and f"(event ids {victim.pk})" in out


def test_a_pinned_event_whose_record_hash_changed_or_that_is_gone_is_found(case) -> None:  # type: ignore[no-untyped-def]
    first, second, _ = pinned(case)
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_event SET record_hash = '\\x00' WHERE id = %s", [first.pk])
        cur.execute("DELETE FROM ingest_event WHERE id = %s", [second.pk])
    status, out = verify("--case", str(case.pk))
    assert status == 1
    assert f"differ from when they were pinned (time or record hash) (event ids {first.pk})" in out
    assert f"are no longer in the store (event ids {second.pk})" in out
    assert "1 event(s) missing from the batch of link 1" in out


def test_a_pinned_event_whose_log_bytes_changed_is_found(case, log) -> None:  # type: ignore[no-untyped-def]
    victim = pinned(case)[0]
    with log.open("r+b") as f:
        f.seek(victim.byte_offset + len(victim.raw) - 2)
        f.write(b"#")
    status, out = verify("--case", str(case.pk))
    assert status == 1
    assert f"1 event(s) whose bytes in {log} differ from what was read (event ids {victim.pk})" in out
    assert "no longer hash to what was read" in out


def test_a_report_file_of_the_case_altered_where_it_is_kept_is_found(case) -> None:  # type: ignore[no-untyped-def]
    report = Report.objects.get(case=case, format="csv")
    data = bytearray(report.path.read_bytes())
    data[-3] ^= 1
    report.path.write_bytes(bytes(data))
    status, out = verify("--case", str(case.pk))
    assert status == 1
    assert f"report #{report.pk} (csv) of case #{case.pk}: {report.path} has SHA-256" in out
    assert f"not the {report.sha256} stored" in out


@pytest.mark.parametrize("fmt", ["json", "csv", "pdf"])
def test_a_report_handed_over_is_recognised(case, tmp_path, fmt) -> None:  # type: ignore[no-untyped-def]
    report = Report.objects.get(case=case, format=fmt)
    copy = tmp_path / f"handed-over.{fmt}"
    shutil.copyfile(report.path, copy)
    status, out = verify("--report", str(copy))
    assert status == 0, out
    assert (
        f"is report #{report.pk} ({fmt}) of case #{case.pk} 'Who wiped shop.orders?', generated by ivy at"
        in out
    )
    if fmt == "pdf":
        assert "its events are not read from a PDF" in out
    else:
        assert "its 3 event(s) have the record hashes the store holds" in out


@pytest.mark.parametrize("fmt", ["json", "csv", "pdf"])
def test_a_report_altered_by_one_byte_is_found(case, tmp_path, fmt) -> None:  # type: ignore[no-untyped-def]
    report = Report.objects.get(case=case, format=fmt)
    data = bytearray(report.path.read_bytes())
    where = data.find(b"DELETE") if fmt != "pdf" else len(data) // 2
    data[where + 1] ^= 0x20  # "DELETE" -> "DeLETE": one bit of one byte
    copy = tmp_path / f"altered.{fmt}"
    copy.write_bytes(bytes(data))
    status, out = verify("--report", str(copy))
    assert status == 1
    assert f"{copy} (SHA-256 " in out and "matches no report AuditWeb generated" in out
    if fmt == "json":  # it names the report it claims to be
        assert (
            f"it says it is report #{report.pk}, whose stored SHA-256 is {report.sha256}: altered since"
            in out
        )


def test_a_report_whose_events_were_changed_in_the_store_since_is_found(case, tmp_path) -> None:  # type: ignore[no-untyped-def]
    report = Report.objects.get(case=case, format="json")
    victim = pinned(case)[2]
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_event SET record_hash = '\\x01' WHERE id = %s", [victim.pk])
    status, out = verify("--report", str(report.path))
    assert status == 1
    assert f"is report #{report.pk} (json)" in out  # the file itself is intact...
    assert f"1 listed event(s) have another record hash in the store (event ids {victim.pk})" in out
