"""Sessions (connections): their filter, their statement counts, an event's neighbours in its session."""

from __future__ import annotations

import django_filters
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from ingest.models import Event, Session
from investigations.query.fields import BigIntegerFilter, BooleanFilter, TimeFilter


class SessionFilter(django_filters.FilterSet):
    user = django_filters.CharFilter(field_name="user", help_text="Account name, exactly")
    host = django_filters.CharFilter(field_name="host", help_text="Client host or IP, exactly")
    server = django_filters.CharFilter(field_name="server", help_text="Server label, exactly")
    connection_id = BigIntegerFilter(
        field_name="connection_id", help_text="The server's connection (thread) id"
    )
    since = TimeFilter(
        field_name="started_at", lookup_expr="gte", help_text="ISO 8601: sessions that began at or after it"
    )
    until = TimeFilter(
        field_name="started_at", lookup_expr="lt", help_text="ISO 8601: sessions that began before it"
    )
    destructive = BooleanFilter(
        method="filter_destructive", help_text="Only sessions that ran a destructive statement"
    )

    class Meta:
        model = Session
        fields: list[str] = []

    def filter_destructive(self, queryset: QuerySet[Session], name: str, value: bool) -> QuerySet[Session]:
        destroyed = Exists(Event.objects.filter(session_id=OuterRef("pk"), destructive=True))
        return queryset.filter(destroyed) if value else queryset.exclude(destroyed)


def filter_sessions(params: dict | None) -> SessionFilter:
    """Apply request parameters to the sessions (connections); check `.is_valid()`, then use `.qs`."""
    return SessionFilter(params, queryset=Session.objects.all())


def statement_counts(session_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Per session: (statements, destructive ones), by the (session, time) index."""
    rows = (
        Event.objects.filter(session_id__in=session_ids)
        .order_by()
        .values_list("session_id")
        .annotate(n=Count("id"), destructive=Count("id", filter=Q(destructive=True)))
    )
    return {sid: (n, d) for sid, n, d in rows}


TRANSACTION_STARTS = ("BEGIN", "START TRANSACTION")
TRANSACTION_ENDS = ("COMMIT", "ROLLBACK")


def transaction_open_before(event: Event) -> bool:
    """Whether an explicit transaction (BEGIN ... COMMIT/ROLLBACK) of the session is open just
    before `event`: a page of a long session may begin in the middle of one."""
    earlier = Q(occurred_at__lt=event.occurred_at) | Q(occurred_at=event.occurred_at, id__lt=event.id)
    last = (
        Event.objects.filter(session_id=event.session_id, occurred_at__isnull=False)
        .filter(earlier, statement_type__in=TRANSACTION_STARTS + TRANSACTION_ENDS)
        .order_by("-occurred_at", "-id")
        .values_list("statement_type", flat=True)
        .first()
    )
    return last in TRANSACTION_STARTS


def session_context(event: Event, size: int) -> tuple[list[Event], list[Event]]:
    """The `size` events of the same session just before and just after `event`, in log order.

    Log order is time, then id (ids follow the order records were read). An event whose
    time is unknown is placed by id alone.
    """
    same = Event.objects.filter(session_id=event.session_id).exclude(pk=event.pk)
    same = same.only("id", "occurred_at", "command", "statement_type", "sql", "destructive", "flags")
    if event.occurred_at is None:
        earlier, later = Q(id__lt=event.id), Q(id__gt=event.id)
    else:
        t = event.occurred_at
        earlier = Q(occurred_at__lt=t) | Q(occurred_at=t, id__lt=event.id)
        later = Q(occurred_at__gt=t) | Q(occurred_at=t, id__gt=event.id)
    before = list(same.filter(earlier).order_by("-occurred_at", "-id")[:size])
    after = list(same.filter(later).order_by("occurred_at", "id")[:size])
    return before[::-1], after
