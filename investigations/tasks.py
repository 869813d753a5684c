"""Celery tasks of the investigation side: thin wrappers over plain functions, and their queuing.

Their registered names (`investigations.tasks.<name>`) are what queued messages carry: keep
`name=` as it is if a task moves.
"""

from __future__ import annotations

import logging

from celery import shared_task

import auditweb.celery  # noqa: F401  (the app these tasks are sent with; see auditweb/__init__.py)
from investigations.bulk_pins import search_pins_write
from investigations.query.tables import tables_seen_refresh
from investigations.reports.generate import report_generate

logger = logging.getLogger(__name__)


@shared_task(name="investigations.tasks.refresh_tables_seen")
def refresh_tables_seen() -> int:
    """Rebuild the Tables page's list of names (a pass over every event)."""
    return tables_seen_refresh()


def queue_tables_refresh() -> None:
    """Queue the rebuild; without a broker the list stays as it is (and says how old it is)."""
    try:
        refresh_tables_seen.delay()
    except Exception:  # the broker is down: the page and the API must still serve the list they have
        logger.warning("could not queue the rebuild of the tables list", exc_info=True)


@shared_task(name="investigations.tasks.generate_report")
def generate_report(report_id: int) -> str | None:
    """Write a case report queued by `report_request`; returns its SHA-256."""
    report = report_generate(report_id)
    return report.sha256 if report else None


@shared_task(name="investigations.tasks.pin_search_events")
def pin_search_events(case_id: int, event_ids: list[int], user_id: int) -> int:
    """Pin the events of a large "new case from this search" (see `bulk_pins.case_from_search`)."""
    return len(search_pins_write(case_id, event_ids, user_id).pinned)
