from __future__ import annotations

from django.urls import path

from investigations import api

urlpatterns = [
    path("events/", api.event_list, name="api-events"),
]
