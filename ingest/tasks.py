"""Celery tasks: thin wrappers that look up rows by id and call plain functions."""

from __future__ import annotations

from celery import shared_task
from celery.app.task import Task
from django.conf import settings

from ingest.partitions import create_partitions_ahead
from ingest.pipeline import SourceBusy, ingest_source, poll_due_sources
from ingest.sources import check_sources_health


@shared_task
def create_event_partitions() -> list[str]:
    """Keep this month's and the next months' event partitions created ahead."""
    return create_partitions_ahead(settings.EVENT_PARTITIONS_AHEAD)


@shared_task
def poll_sources() -> int:
    """Beat's tick: queue an ingest of each enabled source whose interval has passed."""
    return poll_due_sources(lambda source_id: ingest_source_task.delay(source_id))


@shared_task
def check_health() -> int:
    """Beat's tick: an alert for each source whose health changed (silence needs time to show)."""
    return check_sources_health()


@shared_task(bind=True, max_retries=None, name="ingest.tasks.ingest_source")
def ingest_source_task(self: Task, source_id: int, run_id: int | None = None) -> int | None:
    """Read what is new in a source. A run someone asked for waits while another worker holds
    the source; a scheduled poll that finds it busy is dropped (the next one comes soon)."""
    try:
        run = ingest_source(source_id, run_id=run_id)
    except SourceBusy:
        if run_id is None:
            return None
        raise self.retry(countdown=settings.INGEST_POLL_SECONDS) from None
    return run.pk if run else None
