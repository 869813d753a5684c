from __future__ import annotations

from django.urls import path

from investigations import views

urlpatterns = [
    path("", views.event_list, name="events"),
    path("events/<int:event_id>/", views.event_detail, name="event-detail"),
]
