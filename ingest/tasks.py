"""Celery tasks: thin wrappers that look up rows by id and call plain functions."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from ingest.partitions import create_partitions_ahead


@shared_task
def create_event_partitions() -> list[str]:
    """Keep this month's and the next months' event partitions created ahead."""
    return create_partitions_ahead(settings.EVENT_PARTITIONS_AHEAD)
