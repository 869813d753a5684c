from __future__ import annotations

from django.urls import path, re_path

from investigations import api, browse_api, case_api, digest_api, sources_api

urlpatterns = [
    path("events/", api.event_list, name="api-events"),
    path("events/export.ndjson", api.event_export, name="api-events-export"),
    path("events/<int:event_id>/", browse_api.event_detail, name="api-event"),
    path("events/<int:event_id>/reveal/", browse_api.event_reveal, name="api-event-reveal"),
    path("events/<int:event_id>/raw/", browse_api.event_raw, name="api-event-raw"),
    path("alerts/", api.alert_list, name="api-alerts"),
    path("digest/", digest_api.digest_list, name="api-digest"),
    path("sessions/", browse_api.session_list, name="api-sessions"),
    path("sessions/<int:session_id>/", browse_api.session_detail, name="api-session"),
    path("tables/", browse_api.table_list, name="api-tables"),
    # A table name is any text (dots, and from hostile logs slashes or newlines): URL-encode it.
    re_path(r"^tables/(?P<name>[\s\S]+)/history/$", browse_api.table_history, name="api-table-history"),
    path("gaps/", browse_api.gap_list, name="api-gaps"),
    path("sources/", sources_api.source_list, name="api-sources"),
    path("sources/<int:source_id>/", sources_api.source_detail, name="api-source"),
    path("sources/<int:source_id>/ingest/", sources_api.source_ingest, name="api-source-ingest"),
    path("ingest-runs/<int:run_id>/", sources_api.ingest_run_detail, name="api-ingest-run"),
    path("cases/", case_api.case_list, name="api-cases"),
    path("cases/<int:case_id>/", case_api.case_detail, name="api-case"),
    path("cases/<int:case_id>/evidence/", case_api.case_evidence, name="api-case-evidence"),
    path("cases/<int:case_id>/evidence/bulk/", case_api.case_evidence_bulk, name="api-case-evidence-bulk"),
    path("cases/<int:case_id>/evidence/<int:event_id>/", case_api.case_evidence_remove, name="api-unpin"),
    path("cases/<int:case_id>/notes/", case_api.case_notes, name="api-case-notes"),
    path("cases/<int:case_id>/reports/", case_api.case_reports, name="api-case-reports"),
    path("reports/<int:report_id>/", case_api.report_detail, name="api-report"),
    path("reports/<int:report_id>/download/", case_api.report_download, name="api-report-download"),
]
