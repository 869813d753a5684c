"""A large case's report written by a real Celery worker (a separate process, on a queue of its
own, against this test run's PostgreSQL and Redis): queued by the case page, its progress moves,
and the file the worker wrote has the SHA-256 the store shows."""

from __future__ import annotations

import hashlib

import pytest
from django.urls import reverse

from ingest.models import Event
from investigations.cases import case_create
from investigations.models import Evidence, Report
from tests.logwriter import GeneralLogWriter
from tests.processes import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

EVENTS = 1200


def test_a_large_report_is_written_by_a_worker_with_its_progress(
    tmp_path, settings, investigator, investigator_client, ingest_bytes, workers
):
    log = tmp_path / "big.log"
    writer = GeneralLogWriter(log)
    writer.write(EVENTS)
    writer.close()
    ingest_bytes(log.read_bytes(), server="db1", name="general.log")
    case = case_create(user=investigator, title="Many events")
    Evidence.objects.bulk_create(
        Evidence(case=case, event=e, event_occurred_at=e.occurred_at, event_record_hash=bytes(e.record_hash),
                 pinned_by=investigator)
        for e in Event.objects.filter(command="Query")[:EVENTS]
    )  # fmt: skip
    total = case.evidence.count()
    settings.REPORT_DIR = tmp_path / "reports"
    from auditweb.celery import app

    default_queue = app.conf.task_default_queue
    app.conf.task_default_queue = workers.queue  # the worker of this test listens there
    try:
        investigator_client.post(reverse("case-report", args=[case.pk]), {"format": "pdf"})
    finally:
        app.conf.task_default_queue = default_queue
    report = Report.objects.get(case=case)
    assert report.status == "queued" and report.total == total
    workers.start(beat=False, REPORT_DIR=str(settings.REPORT_DIR))
    seen: set[int] = set()

    def finished() -> bool:
        report.refresh_from_db()
        seen.add(report.progress)
        return report.status in ("done", "failed")

    wait_for(finished, workers, seconds=180)
    assert report.status == "done", report.error
    assert report.progress == total and len(seen - {0, total}) >= 1  # it was seen part-way
    assert hashlib.sha256(report.path.read_bytes()).hexdigest() == report.sha256
    page = investigator_client.get(reverse("case-detail", args=[case.pk])).content.decode()
    assert reverse("report-download", args=[report.pk]) in page and report.sha256 in page
