"""A report from request to stored hash.

`report_request` makes the Report row and queues it, once the transaction commits, for a Celery
worker (`investigations.tasks.generate_report`): no report is written inside a request, so neither
a large case nor a long description can run a web worker into its timeout.
`report_generate` writes the file beside its final name, reads it back to hash it, then
renames it: a report that has a SHA-256 in the store is complete on disk.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from investigations import trail
from investigations.models import Case, Evidence, Report

log = logging.getLogger(__name__)

PROGRESS_EVERY = 200  # evidence events between two progress updates in the database

Writer = Callable[[Case, Report, IO[bytes], Callable[[int], None]], None]


def _writers() -> dict[str, Writer]:
    # (the writers load reportlab, which only a worker writing a report needs, not the web process)
    from investigations.reports.csv_report import write_csv
    from investigations.reports.json_report import write_json
    from investigations.reports.pdf import write_pdf

    return {Report.Format.PDF: write_pdf, Report.Format.CSV: write_csv, Report.Format.JSON: write_json}


def report_request(*, case: Case, fmt: str, user: Any, queue: Callable[[int], None]) -> Report:
    """A new report of the case, status queued: `queue(report_id)` is called once the row is
    committed (at the end of the caller's transaction, or of this function's own)."""
    if fmt not in Report.Format.values:
        raise ValueError(f"unknown report format {fmt!r}")
    with transaction.atomic():
        total = Evidence.objects.filter(case=case).count()
        report = Report.objects.create(case=case, format=fmt, generated_by=user, total=total)
        transaction.on_commit(lambda: queue(report.pk))
    return report


def report_generate(report_id: int) -> Report | None:
    """Write the report, hash it and record it. Claimed with one conditional UPDATE, so a
    report queued twice is written once; returns None when another worker has it. A failure
    is stored on the report (status failed, with the error), not raised."""
    claimed = Report.objects.filter(pk=report_id, status=Report.Status.QUEUED).update(
        status=Report.Status.RUNNING, progress=0
    )
    if not claimed:
        return None
    report = Report.objects.select_related("case", "case__created_by", "generated_by").get(pk=report_id)
    name = f"case-{report.case_id}/report-{report.pk}.{report.format}"
    final = Path(settings.REPORT_DIR) / name
    partial = final.with_name(final.name + ".part")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as out:
            _writers()[report.format](report.case, report, out, _progress_saver(report))
            out.flush()
            os.fsync(out.fileno())
        digest, size = file_sha256(partial)
        os.replace(partial, final)
    except Exception as exc:  # kept on the report, shown where it is listed, and logged in full
        log.exception("report %s failed", report.pk)
        partial.unlink(missing_ok=True)
        Report.objects.filter(pk=report.pk).update(
            status=Report.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000]
        )
        report.refresh_from_db()
        return report
    Report.objects.filter(pk=report.pk).update(
        status=Report.Status.DONE,
        progress=report.total,
        file_name=name,
        sha256=digest,
        size=size,
        generated_at=timezone.now(),
    )
    report.refresh_from_db()
    return report


def _progress_saver(report: Report) -> Callable[[int], None]:
    def save(done: int) -> None:
        if done % PROGRESS_EVERY == 0:
            Report.objects.filter(pk=report.pk).update(progress=done)

    return save


def file_sha256(path: Path) -> tuple[str, int]:
    """SHA-256 (hex) and size of a file, read in blocks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


CONTENT_TYPES = {"pdf": "application/pdf", "csv": "text/csv; charset=utf-8", "json": "application/json"}


def report_file(request: Any, report_id: int) -> FileResponse:
    """A done report's file as an attachment, its download in the trail. `request`: the page's
    HttpRequest or the API's DRF Request (the trail takes its token from the latter)."""
    report = get_object_or_404(Report.objects.select_related("case"), pk=report_id, status=Report.Status.DONE)
    path = report.path
    if path is None or not path.exists():
        raise Http404("The report's file is no longer on the server.")
    name = f"auditweb-case-{report.case_id}-report-{report.pk}.{report.format}"
    response = FileResponse(path.open("rb"), as_attachment=True, filename=name)
    response["Content-Type"] = CONTENT_TYPES[report.format]
    response["X-Content-SHA256"] = report.sha256
    response["Cache-Control"] = "private, no-store"
    trail.record(request, trail.Action.REPORT_DOWNLOAD, case=report.case_id, report=report.pk,
                 format=report.format, sha256=report.sha256)  # fmt: skip
    return response
