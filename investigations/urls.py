from __future__ import annotations

from django.urls import path, register_converter

from investigations import session_views, source_views, table_views, views


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
    path("events/<int:event_id>/", views.event_detail, name="event-detail"),
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
]
