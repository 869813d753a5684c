"""The pages' URLs; each name is part of the outward contract (templates and tests reverse them)."""

from __future__ import annotations

from django.urls import path, register_converter

from investigations.views import (
    binlog,
    cases,
    dashboard,
    digest,
    events,
    explorer,
    export,
    pins,
    saved_searches,
    sessions,
    sources,
    tables,
    tokens,
    trail,
    users,
)


class TableNameConverter:
    """Any text: table names hold dots (db.table) and, from hostile logs, slashes or newlines."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TableNameConverter, "table")

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("events/", explorer.event_list, name="events"),
    path("events/export.csv", export.event_export, {"fmt": "csv"}, name="events-export-csv"),
    path("events/export.ndjson", export.event_export, {"fmt": "ndjson"}, name="events-export-ndjson"),
    path("events/export.ecs.ndjson", export.event_export, {"fmt": "ecs.ndjson"}, name="events-export-ecs"),
    path("events/<int:event_id>/", events.event_detail, name="event-detail"),
    path("digest/", digest.digest_page, name="digest"),
    path("searches/save/", saved_searches.saved_search_create, name="saved-search-create"),
    path("searches/<int:saved_id>/", saved_searches.saved_search_open, name="saved-search"),
    path("searches/<int:saved_id>/edit/", saved_searches.saved_search_edit, name="saved-search-edit"),
    path(
        "searches/<int:saved_id>/delete/",
        saved_searches.saved_search_delete,
        name="saved-search-delete",
    ),
    path("events/<int:event_id>/reveal/", events.event_reveal, name="event-reveal"),
    path("events/<int:event_id>/raw/", events.event_raw, name="event-raw"),
    path("sessions/", sessions.session_list, name="sessions"),
    path("sessions/<int:session_id>/", sessions.session_detail, name="session-detail"),
    path("binlog/unexplained/", binlog.binlog_unexplained, name="binlog-unexplained"),
    path("binlog/statements/<int:statement_id>/", binlog.binlog_statement, name="binlog-statement"),
    path("binlog/table-at/", binlog.table_at, name="table-at"),
    path("tables/", tables.table_list, name="tables"),
    path("tables/<table:name>/", tables.table_detail, name="table-detail"),
    path("sources/", sources.source_list, name="sources"),
    path("sources/new/", sources.source_edit, name="source-new"),
    path("sources/upload/", sources.upload, name="source-upload"),
    path("sources/<int:source_id>/", sources.source_detail, name="source-detail"),
    path("sources/<int:source_id>/edit/", sources.source_edit, name="source-edit"),
    path("sources/<int:source_id>/ingest/", sources.source_ingest, name="source-ingest"),
    path("sources/runs/<int:run_id>/", sources.run_detail, name="run-detail"),
    path("cases/", cases.case_list, name="cases"),
    path("cases/new/", cases.case_new, name="case-new"),
    path("cases/pin/", cases.pin, name="pin"),
    path("cases/pin-selected/", pins.pin_selected, name="pin-selected"),
    path("cases/from-search/", pins.case_from_search_view, name="case-from-search"),
    path("cases/save-search/", cases.save_search, name="case-save-search"),
    path("cases/<int:case_id>/", cases.case_detail, name="case-detail"),
    path("cases/<int:case_id>/edit/", cases.case_edit, name="case-edit"),
    path("cases/<int:case_id>/status/", cases.case_status, name="case-status"),
    path("cases/<int:case_id>/notes/", cases.case_note, name="case-note"),
    path("cases/<int:case_id>/searches/", cases.case_filter, name="case-filter"),
    path(
        "cases/<int:case_id>/searches/<int:filter_id>/remove/",
        cases.case_filter_remove,
        name="case-filter-remove",
    ),
    path("cases/<int:case_id>/evidence/<int:event_id>/unpin/", cases.case_unpin, name="case-unpin"),
    path("cases/<int:case_id>/reports/", cases.case_report, name="case-report"),
    path("cases/reports/<int:report_id>/download/", cases.report_download, name="report-download"),
    path("tokens/", tokens.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token-revoke"),
    path("users/", users.user_list, name="users"),
    path("password/", users.password_change, name="password-change"),
    path("users/<int:user_id>/", users.user_change, name="user-change"),
    path("audit/", trail.audit_list, name="audit"),
    path("audit/export.csv", trail.audit_export, name="audit-export"),
]
