"""The facts of a report's one-page summary and of its timeline, counted by PostgreSQL.

Each figure is one aggregate query over the case's pinned events (or, for the timeline's
background, the events its servers logged in the window): the summary costs the same for a
case of ten events and of a hundred thousand. Lists are bounded (the most frequent first) and
say how many more there are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import PurePath
from typing import Any

from django.db import connection
from django.db.models import Count, F, Func, Q, QuerySet, Sum

from ingest.models import Event, Gap
from ingest.parsers import format_choices
from investigations.evidence_custody import ChainHeads, chain_heads
from investigations.models import Case, Evidence
from investigations.query.attribution import EXPLAINED
from investigations.reports import content
from investigations.reports.timeline import Bin, bin_starts, choose_bin

LISTED = 6  # accounts, statement types and tables named on the summary page

# How sure the account of an event is, from how it is known (Event.attribution).
CONFIDENCE = {
    "record": "confirmed",
    "connect": "confirmed",
    "connect_earlier_file": "confirmed",
    "inferred_reopen": "inferred",
    "unattributed": "unknown",
    "": "not recorded",
}
CONFIDENCE_ORDER = ("confirmed", "inferred", "unknown", "not recorded")


@dataclass
class Account:
    who: str  # user@host, or "unknown account"
    servers: list[str]
    events: int
    destructive: int
    confidence: dict[str, int]  # "confirmed"/"inferred"/"unknown"/"not recorded" -> events


@dataclass
class Counted:
    name: str
    events: int
    destructive: int


@dataclass
class GapKind:
    """The gaps of one reason over the window, told once: how many, where, from when to when."""

    reason: str
    count: int
    servers: list[str]
    first: datetime | None
    last: datetime | None
    still_open: bool


@dataclass
class Facts:
    pinned: int
    destructive: int
    first: datetime | None  # the first and last pinned event
    last: datetime | None
    window: tuple[datetime | None, datetime | None]
    window_set: bool  # both ends set on the case (else taken from the pinned events)
    servers: list[str]
    accounts: list[Account]
    accounts_more: int
    types: list[Counted]
    types_more: int
    tables: list[Counted]
    tables_more: int
    rows_affected: int  # summed over the events whose log records it
    rows_known: int  # events whose log records it
    rows_unrecorded: list[tuple[str, int]]  # (log format, statements) whose log does not say
    reasons: list[tuple[str, str, int]]  # (confidence, why in a sentence, events)
    gaps: list[GapKind]
    integrity: dict[str, int]  # content.AS_PINNED / CHANGED / MISSING -> pins
    heads: ChainHeads


def _pinned(case: Case) -> QuerySet[Event]:
    return Event.objects.filter(id__in=Evidence.objects.filter(case=case).values("event_id"))


def _who(user: str | None, host: str | None) -> str:
    if user is None:
        return "unknown account"
    return f"{user}@{host if host is not None else '?'}"


def case_facts(case: Case) -> Facts:
    events = _pinned(case)
    totals = events.aggregate(
        n=Count("id"),
        d=Count("id", filter=Q(destructive=True)),
        rows=Sum("rows_affected"),
        known=Count("id", filter=Q(rows_affected__isnull=False)),
    )
    times = Evidence.objects.filter(case=case, event_occurred_at__isnull=False).order_by("event_occurred_at")
    first = times.values_list("event_occurred_at", flat=True).first()
    last = times.reverse().values_list("event_occurred_at", flat=True).first()
    accounts, accounts_more = _accounts(events)
    types, types_more = _counted(events.values("statement_type", "command"), "statement_type")
    tables, tables_more = _tables(events)
    return Facts(
        pinned=Evidence.objects.filter(case=case).count(),
        destructive=totals["d"],
        first=first,
        last=last,
        window=content.case_window(case),
        window_set=case.window_start is not None and case.window_end is not None,
        servers=sorted(set(events.values_list("server", flat=True).distinct())),
        accounts=accounts,
        accounts_more=accounts_more,
        types=types,
        types_more=types_more,
        tables=tables,
        tables_more=tables_more,
        rows_affected=totals["rows"] or 0,
        rows_known=totals["known"],
        rows_unrecorded=_rows_unrecorded(events),
        reasons=_reasons(events),
        gaps=gap_kinds(case),
        integrity=integrity(case),
        heads=chain_heads(case),
    )


def _accounts(events: QuerySet[Event]) -> tuple[list[Account], int]:
    rows = events.values("user", "host", "server", "attribution").annotate(
        n=Count("id"), d=Count("id", filter=Q(destructive=True))
    )
    found: dict[str, Account] = {}
    for row in rows:
        who = _who(row["user"], row["host"])
        account = found.setdefault(who, Account(who, [], 0, 0, {}))
        if row["server"] not in account.servers:
            account.servers.append(row["server"])
        account.events += row["n"]
        account.destructive += row["d"]
        level = CONFIDENCE.get(row["attribution"] or "", "not recorded")
        account.confidence[level] = account.confidence.get(level, 0) + row["n"]
    ranked = sorted(found.values(), key=lambda a: (-a.destructive, -a.events, a.who))
    for account in ranked:
        account.servers.sort()
    return ranked[:LISTED], max(0, len(ranked) - LISTED)


def _counted(rows: Iterable[dict[str, Any]], key: str) -> tuple[list[Counted], int]:
    counted = rows.annotate(n=Count("id"), d=Count("id", filter=Q(destructive=True)))
    merged: dict[str, Counted] = {}
    for row in counted:
        name = row[key] or row.get("command") or "?"
        item = merged.setdefault(name, Counted(name, 0, 0))
        item.events += row["n"]
        item.destructive += row["d"]
    ranked = sorted(merged.values(), key=lambda c: (-c.destructive, -c.events, c.name))
    return ranked[:LISTED], max(0, len(ranked) - LISTED)


def _tables(events: QuerySet[Event]) -> tuple[list[Counted], int]:
    unnested = events.annotate(table=Func(F("tables"), function="unnest")).values("table")
    return _counted(unnested, "table")


def _rows_unrecorded(events: QuerySet[Event]) -> list[tuple[str, int]]:
    """Pinned statements whose log does not record the rows they changed, per log format (or per
    file, for a source whose format was detected file by file)."""
    formats = dict(format_choices())
    rows = (
        events.filter(rows_affected__isnull=True, command__in=["Query", "Execute"])
        .values("source_file__source__format", "source_file__path")
        .annotate(n=Count("id"))
    )
    out: dict[str, int] = {}
    for row in rows:
        fmt = row["source_file__source__format"]
        name = (
            formats[fmt]
            if fmt in formats and fmt != "auto"
            else f"the log {PurePath(row['source_file__path']).name}"
        )
        out[name] = out.get(name, 0) + row["n"]
    return sorted(out.items())


def _reasons(events: QuerySet[Event]) -> list[tuple[str, str, int]]:
    rows = events.values("attribution").annotate(n=Count("id"))
    found = []
    for row in rows:
        kind = row["attribution"] or ""
        why = EXPLAINED.get(kind, "not recorded: the event was stored before AuditWeb recorded it")
        found.append((CONFIDENCE.get(kind, "not recorded"), why, row["n"]))
    return sorted(found, key=lambda r: (CONFIDENCE_ORDER.index(r[0]), -r[2], r[1]))


def gap_kinds(case: Case) -> list[GapKind]:
    """The gaps over the case's window on the servers of its evidence, one entry per reason and
    server: one server's open gap must not read as another's."""
    start, end = content.case_window(case)
    found = Gap.objects.all()
    servers = list(_pinned(case).values_list("server", flat=True).distinct())
    if servers:
        found = found.filter(server__in=servers)
    if end is not None:
        found = found.filter(Q(started_at__lte=end) | Q(started_at__isnull=True))
    if start is not None:
        found = found.filter(Q(ended_at__gte=start) | Q(ended_at__isnull=True))
    labels = dict(Gap.Reason.choices)
    kinds: dict[tuple[str, str], GapKind] = {}
    for reason, server, started, ended in found.values_list(
        "reason", "server", "started_at", "ended_at"
    ).order_by("reason", "server")[: content.LISTED_MAX * 10]:
        kind = kinds.setdefault(
            (reason, server), GapKind(labels.get(reason, reason), 0, [], None, None, False)
        )
        kind.count += 1
        if server not in kind.servers:
            kind.servers.append(server)
        if started is not None and (kind.first is None or started < kind.first):
            kind.first = started
        if ended is None:
            kind.still_open = True
        elif kind.last is None or ended > kind.last:
            kind.last = ended
    return sorted(kinds.values(), key=lambda k: (k.first is None, k.first, k.reason))


def integrity(case: Case) -> dict[str, int]:
    """Pins whose event is as pinned, changed since, or gone from the store (one query)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CASE WHEN e.id IS NULL THEN %s"
            " WHEN e.record_hash = p.event_record_hash"
            " AND e.occurred_at IS NOT DISTINCT FROM p.event_occurred_at"
            " THEN %s ELSE %s END, COUNT(*)"
            " FROM investigations_evidence p LEFT JOIN ingest_event e ON e.id = p.event_id"
            " WHERE p.case_id = %s GROUP BY 1",
            [content.MISSING, content.AS_PINNED, content.CHANGED, case.pk],
        )
        return dict(cursor.fetchall())


# -- the timeline --------------------------------------------------------------------------------


@dataclass
class Timeline:
    bin: Bin
    starts: list[datetime]
    pinned_destructive: list[int]
    pinned_other: list[int]
    logged: list[int]  # every event the case's servers logged in the bin (pinned ones included)
    gaps: list[tuple[datetime | None, datetime | None, str]]  # within the chart: (from, to, reason)
    start: datetime
    end: datetime


def timeline(case: Case) -> Timeline | None:
    """Events per bin over the case's window (widened to hold every pinned event): the pinned
    ones, destructive apart, over all that the case's servers logged; None without any time."""
    start, end = content.case_window(case)
    times = Evidence.objects.filter(case=case, event_occurred_at__isnull=False).order_by("event_occurred_at")
    first = times.values_list("event_occurred_at", flat=True).first()
    last = times.reverse().values_list("event_occurred_at", flat=True).first()
    ends = [t for t in (start, end, first, last) if t is not None]
    if not ends:
        return None
    start, end = min(ends), max(ends)
    b = choose_bin(end - start)
    starts = bin_starts(start, end, b)
    width_us = b.width // _MICRO
    origin = starts[0]
    n = len(starts)
    pinned_d, pinned_o, logged = [0] * n, [0] * n, [0] * n
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT FLOOR(EXTRACT(EPOCH FROM (p.event_occurred_at - %s)) * 1000000 / %s)::bigint,"
            " COALESCE(e.destructive, false), COUNT(*)"
            " FROM investigations_evidence p LEFT JOIN ingest_event e ON e.id = p.event_id"
            " WHERE p.case_id = %s AND p.event_occurred_at IS NOT NULL GROUP BY 1, 2",
            [origin, width_us, case.pk],
        )
        for i, destructive, count in cursor.fetchall():
            # the last bar holds the chart's end itself (a window ending on a bin's start)
            (pinned_d if destructive else pinned_o)[min(max(i, 0), n - 1)] += count
        servers = list(_pinned(case).values_list("server", flat=True).distinct())
        if servers:
            cursor.execute(
                "SELECT FLOOR(EXTRACT(EPOCH FROM (occurred_at - %s)) * 1000000 / %s)::bigint, COUNT(*)"
                " FROM ingest_event"
                " WHERE server = ANY(%s) AND occurred_at >= %s AND occurred_at <= %s GROUP BY 1",
                [origin, width_us, servers, origin, starts[-1] + b.width],
            )
            for i, count in cursor.fetchall():
                logged[min(max(i, 0), n - 1)] += count
    shown = Gap.objects.filter(Q(started_at__lte=starts[-1] + b.width) | Q(started_at__isnull=True))
    if servers:  # the gaps of the servers whose events are counted
        shown = shown.filter(server__in=servers)
    shown = shown.filter(Q(ended_at__gte=origin) | Q(ended_at__isnull=True))
    labels = dict(Gap.Reason.choices)
    gaps = [
        (g_start, g_end, labels.get(reason, reason))
        for g_start, g_end, reason in shown.order_by("started_at").values_list(
            "started_at", "ended_at", "reason"
        )[: content.LISTED_MAX]
    ]
    return Timeline(b, starts, pinned_d, pinned_o, logged, gaps, start, end)


_MICRO = timedelta(microseconds=1)
