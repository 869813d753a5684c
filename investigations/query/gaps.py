"""Gaps: time the logs show was not recorded, filtered for the API and listed for the pages."""

from __future__ import annotations

from datetime import datetime

import django_filters
from django.db.models import F, Q, QuerySet

from ingest.models import Gap
from investigations.query.fields import BigIntegerFilter, BooleanFilter, TimeFilter

GAPS_SHOWN = 50  # gaps drawn over one chart


class GapFilter(django_filters.FilterSet):
    """Gaps of one server or source, overlapping a time window (an open gap reaches the present)."""

    server = django_filters.CharFilter(field_name="server", help_text="Server label, exactly")
    source = BigIntegerFilter(field_name="source_file__source_id", help_text="Source id")
    reason = django_filters.ChoiceFilter(choices=Gap.Reason.choices, help_text="Why nothing was recorded")
    since = TimeFilter(
        method="filter_since", help_text="ISO 8601: gaps that end after it (or are still open)"
    )
    until = TimeFilter(method="filter_until", help_text="ISO 8601: gaps that start before it")
    open = BooleanFilter(
        field_name="ended_at", lookup_expr="isnull", help_text="Only gaps still open (or only closed ones)"
    )

    class Meta:
        model = Gap
        fields: list[str] = []

    def filter_since(self, queryset: QuerySet[Gap], name: str, value: datetime) -> QuerySet[Gap]:
        return queryset.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=value))

    def filter_until(self, queryset: QuerySet[Gap], name: str, value: datetime) -> QuerySet[Gap]:
        # A gap whose start the log does not show may have begun at any time before its end.
        return queryset.filter(Q(started_at__lt=value) | Q(started_at__isnull=True))


def filter_gaps(params: dict | None) -> GapFilter:
    """Apply request parameters to the gaps; check `.is_valid()`, then use `.qs`."""
    return GapFilter(params, queryset=Gap.objects.select_related("source_file__source"))


def recent_gaps(limit: int) -> list[Gap]:
    """The newest gaps, open ones (logging still off) first."""
    order = (F("ended_at").desc(nulls_first=True), F("started_at").desc(nulls_last=True), "-id")
    return list(Gap.objects.select_related("source_file").order_by(*order)[:limit])


def gaps_between(start: datetime, end: datetime, server: str | None) -> list[Gap]:
    """Gaps (nothing recorded) that overlap [start, end), of one server or all."""
    gaps = Gap.objects.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    if server:
        gaps = gaps.filter(server=server)
    return list(gaps.order_by("started_at")[:GAPS_SHOWN])
