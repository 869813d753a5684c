from __future__ import annotations

from django.urls import path, register_converter

from investigations import (
    audit_views,
    case_views,
    digest_views,
    export_views,
    pin_views,
    saved_search_views,
    session_views,
    source_views,
    table_views,
    token_views,
    user_views,
    views,
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
    path("", views.dashboard, name="dashboard"),
    path("events/", views.event_list, name="events"),
    path("events/export.csv", export_views.event_export, {"fmt": "csv"}, name="events-export-csv"),
    path("events/export.ndjson", export_views.event_export, {"fmt": "ndjson"}, name="events-export-ndjson"),
    path(
        "events/export.ecs.ndjson", export_views.event_export, {"fmt": "ecs.ndjson"}, name="events-export-ecs"
    ),
    path("events/<int:event_id>/", views.event_detail, name="event-detail"),
    path("digest/", digest_views.digest_page, name="digest"),
    path("searches/save/", saved_search_views.saved_search_create, name="saved-search-create"),
    path("searches/<int:saved_id>/", saved_search_views.saved_search_open, name="saved-search"),
    path("searches/<int:saved_id>/edit/", saved_search_views.saved_search_edit, name="saved-search-edit"),
    path(
        "searches/<int:saved_id>/delete/",
        saved_search_views.saved_search_delete,
        name="saved-search-delete",
    ),
    path("events/<int:event_id>/reveal/", views.event_reveal, name="event-reveal"),
    path("events/<int:event_id>/raw/", views.event_raw, name="event-raw"),
    path("sessions/", session_views.session_list, name="sessions"),
    path("sessions/<int:session_id>/", session_views.session_detail, name="session-detail"),
    path("tables/", table_views.table_list, name="tables"),
    path("tables/<table:name>/", table_views.table_detail, name="table-detail"),
    path("sources/", source_views.source_list, name="sources"),
    path("sources/new/", source_views.source_edit, name="source-new"),
    path("sources/upload/", source_views.upload, name="source-upload"),
    path("sources/<int:source_id>/", source_views.source_detail, name="source-detail"),
    path("sources/<int:source_id>/edit/", source_views.source_edit, name="source-edit"),
    path("sources/<int:source_id>/ingest/", source_views.source_ingest, name="source-ingest"),
    path("sources/runs/<int:run_id>/", source_views.run_detail, name="run-detail"),
    path("cases/", case_views.case_list, name="cases"),
    path("cases/new/", case_views.case_new, name="case-new"),
    path("cases/pin/", case_views.pin, name="pin"),
    path("cases/pin-selected/", pin_views.pin_selected, name="pin-selected"),
    path("cases/from-search/", pin_views.case_from_search_view, name="case-from-search"),
    path("cases/save-search/", case_views.save_search, name="case-save-search"),
    path("cases/<int:case_id>/", case_views.case_detail, name="case-detail"),
    path("cases/<int:case_id>/edit/", case_views.case_edit, name="case-edit"),
    path("cases/<int:case_id>/status/", case_views.case_status, name="case-status"),
    path("cases/<int:case_id>/notes/", case_views.case_note, name="case-note"),
    path("cases/<int:case_id>/searches/", case_views.case_filter, name="case-filter"),
    path(
        "cases/<int:case_id>/searches/<int:filter_id>/remove/",
        case_views.case_filter_remove,
        name="case-filter-remove",
    ),
    path("cases/<int:case_id>/evidence/<int:event_id>/unpin/", case_views.case_unpin, name="case-unpin"),
    path("cases/<int:case_id>/reports/", case_views.case_report, name="case-report"),
    path("cases/reports/<int:report_id>/download/", case_views.report_download, name="report-download"),
    path("tokens/", token_views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token-revoke"),
    path("users/", user_views.user_list, name="users"),
    path("password/", user_views.password_change, name="password-change"),
    path("users/<int:user_id>/", user_views.user_change, name="user-change"),
    path("audit/", audit_views.audit_list, name="audit"),
    path("audit/export.csv", audit_views.audit_export, name="audit-export"),
]
