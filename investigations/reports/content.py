"""What a report of a case says, gathered once for every format.

Evidence is read in chunks in the events' order, each pin beside the stored event it points
to, so a case of 10,000 events never sits in memory at once. A pinned event that is gone from
the store, or whose stored time or record hash differs from what was pinned, is reported as
such: it is never dropped or shown as if nothing happened.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F, Q

from ingest.chunks import fill_raw
from ingest.models import BinlogStatement, Event, Gap, IngestRun, SourceFile
from investigations.models import Case, CaseNote, Evidence, Report, SavedFilter
from investigations.query.binlog import (
    RowsUnavailable,
    confidence_of,
    rows_changed_of,
    rows_page,
    statements_of,
)

CHUNK = 500  # evidence rows (and their events) fetched at a time
ROWS_PER_EVENT = 20  # binlog rows a report gives of one event; the API has them all
LISTED_MAX = 1000  # gaps, source files and ingest runs listed; beyond that the report says how many more

AS_PINNED = "as pinned"
CHANGED = "changed since pinned"
MISSING = "missing from the store"


@dataclass(frozen=True)
class EventRows:
    """The rows an event's binlog statements changed, bounded (ROWS_PER_EVENT), with the join's word."""

    rows_changed: int | None  # as the API's: null where it may be another account's
    confidence: str | None
    evidence: list[str]
    statements: list[dict[str, Any]]  # binlog file, position, rows, confidence, candidates
    total: int
    rows: list[dict[str, Any]]  # as /rows/ gives them: table, change, before, after
    error: str | None = None  # the binlog file cannot be read any more

    @property
    def more(self) -> int:
        return max(0, self.total - len(self.rows))

    @property
    def sure(self) -> bool:
        return self.confidence in BinlogStatement.SURE

    def more_note(self, event_id: int) -> str:
        return f"{self.more:,} more rows: see the API, /api/v1/events/{event_id}/rows/" if self.more else ""


@dataclass
class Item:
    """One piece of evidence: its number in the report, the pin, and the stored event now."""

    number: int
    pin: Evidence
    event: Event | None
    rows: EventRows | None = None  # from the binary log (None: no binlog statement is tied to it)

    @property
    def integrity(self) -> str:
        if self.event is None:
            return MISSING
        same_hash = bytes(self.event.record_hash) == bytes(self.pin.event_record_hash)
        if not same_hash or self.event.occurred_at != self.pin.event_occurred_at:
            return CHANGED
        return AS_PINNED


@dataclass
class Listed:
    """Rows of a bounded list, and how many more there are than were listed."""

    rows: list[Any]
    more: int = 0


@dataclass
class Summary:
    """The case's facts for a report's first page (a few queries, no evidence held)."""

    case: Case
    report: Report
    investigators: list[str]
    evidence_count: int
    destructive_count: int
    window: tuple[datetime | None, datetime | None]
    accounts: list[tuple[str, int, int]]  # "user@host", events, destructive ones
    servers: list[str]
    integrity: dict[str, int] = field(default_factory=dict)


def evidence_pins(case: Case) -> Any:
    """The case's pins in the events' order (unknown times last)."""
    order = (F("event_occurred_at").asc(nulls_last=True), "event_id")
    return Evidence.objects.filter(case=case).select_related("pinned_by").order_by(*order)


def evidence_items(case: Case, chunk: int = CHUNK) -> Iterator[Item]:
    """Every pin with its stored event, `chunk` at a time: one query for the pins of a chunk
    (keyset on their order), one for their events (by id, with file and session)."""
    number = 0
    pins = evidence_pins(case)
    after: tuple[datetime | None, int] | None = None
    while True:
        page = pins
        if after is not None:
            page = page.filter(after_pin(*after))
        batch = list(page[:chunk])
        if not batch:
            return
        events = Event.objects.select_related("source_file", "session").filter(
            id__in=[p.event_id for p in batch]
        )
        by_id = {e.id: e for e in events}
        fill_raw(by_id.values())  # (the reports show each one's raw bytes: each chunk read once)
        rows = _rows_of(list(by_id.values()))
        for pin in batch:
            number += 1
            yield Item(number=number, pin=pin, event=by_id.get(pin.event_id), rows=rows.get(pin.event_id))
        last = batch[-1]
        after = (last.event_occurred_at, last.event_id)


def _rows_of(events: list[Event]) -> dict[int, EventRows]:
    """The binlog rows of the events of a chunk that have any: one query finds which do."""
    ids = [e.pk for e in events]
    with_rows: set[int] = set()
    for event_id, candidates in BinlogStatement.objects.filter(
        Q(event_id__in=ids) | Q(candidates__overlap=ids)
    ).values_list("event_id", "candidates"):
        with_rows |= {event_id, *candidates} & set(ids)
    out: dict[int, EventRows] = {}
    for e in events:
        if e.pk in with_rows:
            out[e.pk] = event_rows(e)
    return out


def event_rows(event: Event) -> EventRows:
    statements = statements_of(event)
    evidence: list[str] = []
    for s in statements:
        evidence += [x for x in s.evidence if x not in evidence]
    brief = [
        {
            "binlog_file": s.transaction.file_name,
            "position": s.transaction.start,
            "gtid": s.transaction.gtid,
            "thread_id": s.thread_id,
            "committed_at": s.transaction.commit_time,
            "rows": s.rows,
            "confidence": s.confidence,
            "candidates": list(s.candidates),
        }
        for s in statements
    ]
    total = sum(s.rows for s in statements)
    error, rows = None, []
    try:
        rows = rows_page(statements, offset=0, limit=ROWS_PER_EVENT).rows
    except RowsUnavailable as e:
        error = str(e)
    return EventRows(
        rows_changed=rows_changed_of([event])[event.pk],
        confidence=confidence_of(statements),
        evidence=evidence,
        statements=brief,
        total=total,
        rows=rows,
        error=error,
    )


def after_pin(occurred_at: datetime | None, event_id: int) -> Q:
    """Pins after (occurred_at, event_id) in the order of `evidence_pins` (NULL times last)."""
    if occurred_at is None:
        return Q(event_occurred_at__isnull=True, event_id__gt=event_id)
    return (
        Q(event_occurred_at__gt=occurred_at)
        | Q(event_occurred_at=occurred_at, event_id__gt=event_id)
        | Q(event_occurred_at__isnull=True)
    )


def _pinned_events(case: Case) -> Any:
    return Event.objects.filter(id__in=Evidence.objects.filter(case=case).values("event_id"))


def case_window(case: Case) -> tuple[datetime | None, datetime | None]:
    """The case's own time window; an open end is the first or last pinned event's time."""
    start, end = case.window_start, case.window_end
    if start is None or end is None:
        times = Evidence.objects.filter(case=case, event_occurred_at__isnull=False).order_by(
            "event_occurred_at"
        )
        first = times.values_list("event_occurred_at", flat=True).first()
        last = times.values_list("event_occurred_at", flat=True).last()
        start = start or first
        end = end or last
    return start, end


def summary(case: Case, report: Report) -> Summary:
    events = _pinned_events(case)
    accounts: dict[str, list[int]] = {}
    rows = events.values_list("user", "host", "destructive")
    for user, host, destructive in rows.iterator(chunk_size=2000):
        who = f"{user}@{host if host is not None else '?'}" if user is not None else "unknown account"
        counts = accounts.setdefault(who, [0, 0])
        counts[0] += 1
        counts[1] += int(destructive)
    ranked = sorted(accounts.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))
    return Summary(
        case=case,
        report=report,
        investigators=sorted(u.get_username() for u in case.investigators.all()),
        evidence_count=Evidence.objects.filter(case=case).count(),
        destructive_count=events.filter(destructive=True).count(),
        window=case_window(case),
        accounts=[(who, c[0], c[1]) for who, c in ranked],
        servers=sorted(set(events.values_list("server", flat=True).distinct())),
    )


def notes(case: Case) -> list[CaseNote]:
    return list(case.notes.select_related("author").order_by("created_at", "id"))


def saved_filters(case: Case) -> list[SavedFilter]:
    return list(case.saved_filters.order_by("created_at", "id"))


def gaps(case: Case) -> Listed:
    """Gaps of any server that overlap the case's window (all of them when it has none)."""
    start, end = case_window(case)
    found = Gap.objects.select_related("source_file").order_by(F("started_at").asc(nulls_first=True), "id")
    if end is not None:
        found = found.filter(Q(started_at__lte=end) | Q(started_at__isnull=True))
    if start is not None:
        found = found.filter(Q(ended_at__gte=start) | Q(ended_at__isnull=True))
    return _bounded(found)


def source_files(case: Case) -> Listed:
    """The files the pinned events were read from, with their hashes."""
    ids = _pinned_events(case).values("source_file_id")
    files = SourceFile.objects.select_related("source").filter(id__in=ids).order_by("path", "id")
    return _bounded(files)


def ingest_runs(case: Case) -> Listed:
    """The ingest runs that read those files or stored the pinned events."""
    events = _pinned_events(case)
    runs = IngestRun.objects.select_related("source", "source_file").filter(
        Q(source_file_id__in=events.values("source_file_id")) | Q(id__in=events.values("ingest_run_id"))
    )
    return _bounded(runs.order_by("started_at", "id"))


def _bounded(queryset: Any) -> Listed:
    rows = list(queryset[: LISTED_MAX + 1])
    if len(rows) <= LISTED_MAX:
        return Listed(rows)
    return Listed(rows[:LISTED_MAX], more=queryset.count() - LISTED_MAX)
