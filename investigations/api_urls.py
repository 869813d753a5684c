from __future__ import annotations

from django.urls import path

from investigations import api, sources_api

urlpatterns = [
    path("events/", api.event_list, name="api-events"),
    path("events/export.ndjson", api.event_export, name="api-events-export"),
    path("alerts/", api.alert_list, name="api-alerts"),
    path("sources/", sources_api.source_list, name="api-sources"),
    path("sources/<int:source_id>/", sources_api.source_detail, name="api-source"),
    path("sources/<int:source_id>/ingest/", sources_api.source_ingest, name="api-source-ingest"),
    path("ingest-runs/<int:run_id>/", sources_api.ingest_run_detail, name="api-ingest-run"),
]
