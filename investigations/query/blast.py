"""The blast radius: rows changed as the explorer's column shows them, and the largest destructive
statements of a period on the dashboard. Only sure links count: a number that may be another
account's is never given as an event's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Sum

from ingest.models import BinlogStatement, Event
from investigations.query.binlog import rows_changed_of

AMBIGUOUS = "?"  # the event is one of several candidates of some rows


def rows_marks(events: Iterable[Event]) -> dict[int, int | str | None]:
    """What the explorer's Rows column shows for each event: the rows linked to it for sure (0
    when a binlog covers it and nothing is linked), AMBIGUOUS when it is only one of several
    candidates, None where no binlog covers it."""
    events = list(events)
    known = rows_changed_of(events)
    unknown = [pk for pk, n in known.items() if n is None]
    if not unknown:
        return dict(known)
    candidates = {
        c
        for cands in BinlogStatement.objects.filter(candidates__overlap=unknown).values_list(
            "candidates", flat=True
        )
        for c in cands
    }
    return {pk: (AMBIGUOUS if n is None and pk in candidates else n) for pk, n in known.items()}


def mark_rows(events: list[Event]) -> None:
    """Each event's Rows column (`rows_mark`, as rows_marks says), one lookup for a page."""
    marks = rows_marks(events)
    for e in events:
        e.rows_mark = marks[e.pk]  # type: ignore[attr-defined]  # an attribute the templates show


@dataclass(frozen=True)
class Largest:
    event: Event
    rows: int


@dataclass(frozen=True)
class LargestOfPeriod:
    statements: list[Largest]
    ambiguous: int  # destructive row statements of the period that only ambiguously fit an event


def largest_destructive(since: datetime | None, limit: int = 10) -> LargestOfPeriod:
    """The destructive statements with the most rows linked to them for sure, from `since` (the
    event's time); and how many ambiguous row statements of that period are not counted."""
    linked = BinlogStatement.objects.filter(event_id__isnull=False, confidence__in=BinlogStatement.SURE)
    unsure = BinlogStatement.objects.filter(confidence=BinlogStatement.Confidence.AMBIGUOUS)
    if since is not None:
        linked = linked.filter(time__gte=since)
        unsure = unsure.filter(time__gte=since)
    totals = (
        linked.values("event_id")
        .annotate(n=Sum("rows"))
        .order_by("-n", "-event_id")
        .values_list("event_id", "n")
    )
    out: list[Largest] = []
    # Read in small steps: the biggest row counts may belong to events that are not destructive
    # (an INSERT ... SELECT), which the dashboard leaves out.
    offset = 0
    while len(out) < limit:
        chunk = list(totals[offset : offset + limit * 4])
        if not chunk:
            break
        offset += len(chunk)
        found = Event.objects.filter(pk__in=[pk for pk, _ in chunk], destructive=True).defer("raw_inline")
        if since is not None:
            found = found.filter(occurred_at__gte=since)
        events = {e.pk: e for e in found}
        out += [Largest(events[pk], n) for pk, n in chunk if pk in events][: limit - len(out)]
    return LargestOfPeriod(out, unsure.count())
