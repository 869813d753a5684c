"""Celery tasks of the investigation side: thin wrappers over plain functions."""

from __future__ import annotations

from celery import shared_task

from investigations.tables import tables_seen_refresh


@shared_task
def refresh_tables_seen() -> int:
    """Rebuild the Tables page's list of names (a pass over every event)."""
    return tables_seen_refresh()


@shared_task
def generate_report(report_id: int) -> str | None:
    """Write a case report queued by `report_request`; returns its SHA-256."""
    from investigations.reports.generate import report_generate

    report = report_generate(report_id)
    return report.sha256 if report else None


@shared_task
def pin_search_events(case_id: int, event_ids: list[int], user_id: int) -> int:
    """Pin the events of a large "new case from this search" (see `bulk_pins.case_from_search`)."""
    from investigations.bulk_pins import search_pins_write

    return len(search_pins_write(case_id, event_ids, user_id).pinned)
