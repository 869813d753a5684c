"""The explorer's timeline: events per time bucket and statement type, with the gaps over it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, DateTimeField, F, Func, QuerySet, Value
from django.db.models.functions import Coalesce, NullIf

from ingest.models import Event, Gap
from investigations.query.gaps import gaps_between

BUCKET_WIDTHS = [
    timedelta(seconds=s)
    for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
] + [timedelta(days=d) for d in (2, 7, 14, 28, 91, 364)]
MAX_BUCKETS = 120
MAX_SERIES = 8  # statement types drawn each in its own colour (per side: destructive or not)


def bucket_width(span: timedelta, most: int = MAX_BUCKETS) -> timedelta:
    """The narrowest width from BUCKET_WIDTHS that cuts `span` into at most `most` buckets."""
    for width in BUCKET_WIDTHS:
        if span <= width * most:
            return width
    return timedelta(days=-(-span.days // most) + 1)


@dataclass(frozen=True)
class Series:
    label: str
    destructive: bool
    counts: list[int]


@dataclass(frozen=True)
class Timeline:
    starts: list[datetime]  # each bucket's start
    width: timedelta
    series: list[Series]
    gaps: list[Gap]

    @property
    def end(self) -> datetime:
        return self.starts[-1] + self.width

    @property
    def total(self) -> int:
        return sum(sum(s.counts) for s in self.series)


def time_bounds(queryset: QuerySet[Event]) -> tuple[datetime | None, datetime | None]:
    """The first and last time of the events (two walks of the time index from either end).

    Asked as ORDER BY ... LIMIT 1, not min() and max(): PostgreSQL turns min() and max() into
    walks of an index only over one table, and events are the view `ingest_event` (a join, left
    out of the plan only later): over it they read every row (4.3 s at 10 million events)."""
    timed = queryset.filter(occurred_at__isnull=False).values_list("occurred_at", flat=True)
    return timed.order_by("occurred_at").first(), timed.order_by("-occurred_at").first()


def timeline(
    queryset: QuerySet[Event],
    since: datetime,
    until: datetime,
    *,
    origin: datetime,
    server: str | None = None,
) -> Timeline | None:
    """Events of `queryset` in [since, until) per time bucket and statement type (destructive
    ones apart), with the gaps there. None: an empty range, nothing to draw.

    Buckets are `date_bin(width, occurred_at, origin)`: `origin` is a midnight in the viewer's
    zone, so hours and days start where the viewer's clock says they do.
    """
    if until <= since:
        return None
    width = bucket_width(until - since)
    first = origin + ((since - origin) // width) * width
    starts = [first]
    while starts[-1] + width < until:
        starts.append(starts[-1] + width)
    bucket = Func(
        Value(width), F("occurred_at"), Value(origin), function="date_bin", output_field=DateTimeField()
    )
    rows = (
        queryset.filter(occurred_at__gte=since, occurred_at__lt=until)
        .order_by()
        .annotate(bucket=bucket, label=Coalesce(NullIf("statement_type", Value("")), "command"))
        .values_list("bucket", "label", "destructive")
        .annotate(n=Count("*"))
    )
    index = {start: i for i, start in enumerate(starts)}
    counts: dict[tuple[str, bool], list[int]] = {}
    for bucket, label, destructive, n in rows:
        counts.setdefault((label, destructive), [0] * len(starts))[index[bucket]] += n
    return Timeline(starts, width, _top_series(counts), gaps_between(starts[0], until, server))


def _top_series(counts: dict[tuple[str, bool], list[int]]) -> list[Series]:
    """The MAX_SERIES largest statement types of each side; the rest of a side as one "other"."""
    series: list[Series] = []
    for destructive in (True, False):
        side = sorted(
            ((label, c) for (label, d), c in counts.items() if d == destructive), key=lambda lc: -sum(lc[1])
        )
        series += [Series(label, destructive, c) for label, c in side[:MAX_SERIES]]
        if len(side) > MAX_SERIES:
            rest = [sum(column) for column in zip(*(c for _, c in side[MAX_SERIES:]), strict=True)]
            series.append(Series("other destructive" if destructive else "other", destructive, rest))
    return series
