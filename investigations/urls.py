from __future__ import annotations

from django.urls import path

from investigations import source_views, views

urlpatterns = [
    path("", views.event_list, name="events"),
    path("events/<int:event_id>/", views.event_detail, name="event-detail"),
    path("sources/", source_views.source_list, name="sources"),
    path("sources/new/", source_views.source_edit, name="source-new"),
    path("sources/upload/", source_views.upload, name="source-upload"),
    path("sources/<int:source_id>/", source_views.source_detail, name="source-detail"),
    path("sources/<int:source_id>/edit/", source_views.source_edit, name="source-edit"),
    path("sources/<int:source_id>/ingest/", source_views.source_ingest, name="source-ingest"),
    path("sources/runs/<int:run_id>/", source_views.run_detail, name="run-detail"),
]
