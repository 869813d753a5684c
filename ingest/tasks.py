"""Celery tasks: thin wrappers that look up rows by id and call plain functions."""

from __future__ import annotations

from celery import shared_task
from celery.app.task import Task
from django.conf import settings

import auditweb.celery  # noqa: F401  (the app these tasks are sent with; see auditweb/__init__.py)
from ingest.follow import SourceBusy, ingest_source, look_at_followed_files, poll_due_sources
from ingest.models import Chunk, Split
from ingest.partitions import create_partitions_ahead
from ingest.sources import check_sources_health
from ingest.split import finish_split, read_chunk


@shared_task
def create_event_partitions() -> list[str]:
    """Keep this month's and the next months' event partitions created ahead."""
    return create_partitions_ahead(settings.EVENT_PARTITIONS_AHEAD)


@shared_task
def poll_sources() -> int:
    """Beat's tick: queue an ingest of each enabled source whose interval has passed, and of each
    followed file source whose files changed or whose quiet last record is due. A poll queued
    for a change that waits longer than a few ticks is dropped unrun: a later tick queues another."""
    queued: list[int] = []

    def due(source_id: int) -> None:
        queued.append(source_id)
        ingest_source_task.delay(source_id)

    def changed(source_id: int) -> None:
        ingest_source_task.apply_async((source_id,), expires=max(10, 5 * settings.INGEST_POLL_SECONDS))

    polled = poll_due_sources(due)  # (queued on commit: at once, outside a transaction)
    return polled + look_at_followed_files(changed, skip=queued)


@shared_task
def check_health() -> int:
    """Beat's tick: an alert for each source whose health changed (silence needs time to show)."""
    return check_sources_health()


@shared_task(bind=True, max_retries=None, name="ingest.tasks.ingest_source")
def ingest_source_task(self: Task, source_id: int, run_id: int | None = None) -> int | None:
    """Read what is new in a source. A run someone asked for waits while another worker holds
    the source; a scheduled poll that finds it busy is dropped (the next one comes soon)."""
    try:
        run = ingest_source(
            source_id, run_id=run_id, dispatch=lambda chunk_id: ingest_chunk_task.delay(chunk_id)
        )
    except SourceBusy:
        if run_id is None:
            return None
        raise self.retry(countdown=settings.INGEST_POLL_SECONDS) from None
    return run.pk if run else None


@shared_task(
    name="ingest.tasks.ingest_chunk",
    autoretry_for=(Exception,),
    retry_backoff=2,
    max_retries=8,
)
def ingest_chunk_task(chunk_id: int) -> bool:
    """Read one range of a shared-out backlog (ingest.split). Another worker holding it, or a
    range already read, is nothing to do. A range that failed (the database went away...) is
    tried again from where its last batch ended, and a poll of the source (a followed one)
    queues again a range whose worker died."""
    done = read_chunk(chunk_id)
    if done:
        split_id = Chunk.objects.values_list("split_id", flat=True).get(pk=chunk_id)
        if not finish_split(split_id):  # the source's lock was busy: try again in a moment
            finish_split_task.apply_async((split_id,), countdown=1)
    return done


@shared_task(bind=True, max_retries=120, name="ingest.tasks.finish_split")
def finish_split_task(self: Task, split_id: int) -> bool:
    """End a split whose ranges are all read, once the source's lock is free."""
    split = Split.objects.get(pk=split_id)
    if split.finished_at or not split.planned or split.chunks.filter(done=False).exists():
        return split.finished_at is not None  # the last range (or a poll) ends it
    if not finish_split(split_id):
        raise self.retry(countdown=1)
    return True
