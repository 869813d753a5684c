"""The REST API's URLs (`/api/v1/`); each name is part of the outward contract."""

from __future__ import annotations

from django.urls import path, re_path

from investigations.api import (
    alerts,
    cases,
    digest,
    event_detail,
    event_rows,
    events,
    flashback,
    gaps,
    reports,
    sessions,
    sources,
    tables,
)

urlpatterns = [
    path("events/", events.event_list, name="api-events"),
    path("events/export.ndjson", events.event_export, name="api-events-export"),
    path("events/<int:event_id>/", event_detail.event_detail, name="api-event"),
    path("events/<int:event_id>/reveal/", event_detail.event_reveal, name="api-event-reveal"),
    path("events/<int:event_id>/raw/", event_detail.event_raw, name="api-event-raw"),
    path("events/<int:event_id>/rows/", event_rows.event_rows, name="api-event-rows"),
    path("events/<int:event_id>/flashback/", event_rows.event_flashback_sql, name="api-event-flashback"),
    path("alerts/", alerts.alert_list, name="api-alerts"),
    path("digest/", digest.digest_list, name="api-digest"),
    path("sessions/", sessions.session_list, name="api-sessions"),
    path("sessions/<int:session_id>/", sessions.session_detail, name="api-session"),
    path("tables/", tables.table_list, name="api-tables"),
    # A table name is any text (dots, and from hostile logs slashes or newlines): URL-encode it.
    re_path(r"^tables/(?P<name>[\s\S]+)/history/$", tables.table_history, name="api-table-history"),
    re_path(
        r"^tables/(?P<name>[\s\S]+)/flashback/$", flashback.table_flashback_sql, name="api-table-flashback"
    ),
    path("gaps/", gaps.gap_list, name="api-gaps"),
    path("sources/", sources.source_list, name="api-sources"),
    path("sources/<int:source_id>/", sources.source_detail, name="api-source"),
    path("sources/<int:source_id>/ingest/", sources.source_ingest, name="api-source-ingest"),
    path("ingest-runs/<int:run_id>/", sources.ingest_run_detail, name="api-ingest-run"),
    path("cases/", cases.case_list, name="api-cases"),
    path("cases/<int:case_id>/", cases.case_detail, name="api-case"),
    path("cases/<int:case_id>/evidence/", cases.case_evidence, name="api-case-evidence"),
    path("cases/<int:case_id>/evidence/bulk/", cases.case_evidence_bulk, name="api-case-evidence-bulk"),
    path("cases/<int:case_id>/evidence/<int:event_id>/", cases.case_evidence_remove, name="api-unpin"),
    path("cases/<int:case_id>/notes/", cases.case_notes, name="api-case-notes"),
    path("cases/<int:case_id>/flashback/", flashback.case_flashback_sql, name="api-case-flashback"),
    path("cases/<int:case_id>/reports/", reports.case_reports, name="api-case-reports"),
    path("reports/<int:report_id>/", reports.report_detail, name="api-report"),
    path("reports/<int:report_id>/download/", reports.report_download, name="api-report-download"),
]
