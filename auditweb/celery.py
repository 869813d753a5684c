"""The Celery app `auditweb`: `celery -A auditweb worker` and `celery -A auditweb beat`."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")

app = Celery("auditweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
