"""The one query layer: every page, chart, API call and report filters events here.

`EventFilter` turns request parameters into a queryset (validated, never raw SQL
from strings); `keyset_page` walks it newest first with an opaque cursor that
stays stable while ingestion adds rows.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime

import django_filters
from django.db.models import F, Q, QuerySet
from django.db.models.expressions import RawSQL

from ingest.models import Event
from ingest.sql.renames import rename_pairs

STATEMENT_TYPES = [
    "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "TRUNCATE", "DROP TABLE", "DROP DATABASE",
    "DROP VIEW", "ALTER TABLE", "RENAME TABLE", "CREATE TABLE", "GRANT", "REVOKE", "SET", "CALL",
]  # fmt: skip


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class EventFilter(django_filters.FilterSet):
    user = django_filters.CharFilter(field_name="user", help_text="Account name, exactly")
    host = django_filters.CharFilter(field_name="host", help_text="Client host or IP, exactly")
    server = django_filters.CharFilter(field_name="server", help_text="Server label, exactly")
    database = django_filters.CharFilter(field_name="database", help_text="Current schema, exactly")
    table = django_filters.CharFilter(
        method="filter_table", help_text="`db.table`, or a bare table name matching it in any database"
    )
    statement_type = django_filters.MultipleChoiceFilter(
        field_name="statement_type",
        choices=[(t, t) for t in STATEMENT_TYPES],
        help_text="Statement type (repeatable), e.g. DELETE",
    )
    destructive = django_filters.BooleanFilter(field_name="destructive", help_text="Only (or no) destructive")
    flag = django_filters.CharFilter(method="filter_flag", help_text="A flag, e.g. no_where or unattributed")
    connection_id = django_filters.NumberFilter(field_name="connection_id")
    session = django_filters.CharFilter(
        field_name="session__key", help_text="Session key `server/boot/connection id`, exactly"
    )
    since = django_filters.IsoDateTimeFilter(
        field_name="occurred_at", lookup_expr="gte", help_text="ISO 8601"
    )
    until = django_filters.IsoDateTimeFilter(field_name="occurred_at", lookup_expr="lt", help_text="ISO 8601")
    q = django_filters.CharFilter(method="filter_text", help_text="Text in the SQL (case-insensitive)")

    class Meta:
        model = Event
        fields: list[str] = []

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        # Statement types are open-ended (the classifier names many); accept any upper-case phrase.
        self.filters["statement_type"].extra["choices"] = [
            (t, t) for t in sorted(set(STATEMENT_TYPES) | set(self._requested_types()))
        ]

    def _requested_types(self) -> list[str]:
        data = self.data or {}
        values = (
            data.getlist("statement_type") if hasattr(data, "getlist") else data.get("statement_type", [])
        )
        if isinstance(values, str):
            values = [values]
        return [v for v in values if isinstance(v, str) and 0 < len(v) <= 60]

    def filter_table(self, queryset: QuerySet[Event], name: str, value: str) -> QuerySet[Event]:
        value = value.strip()
        if "." in value:
            match = Q(tables__contains=[value])
            starts = [value]
        else:
            # A bare name matches `<any db>.<name>` as well as an unqualified name.
            matches = RawSQL(
                "EXISTS (SELECT 1 FROM unnest(ingest_event.tables) AS t(name)"
                " WHERE t.name = %s OR t.name LIKE %s ESCAPE '\\')",
                (value, "%." + _like_escape(value)),
            )
            queryset = queryset.annotate(table_match=matches)
            match = Q(table_match=True)
            renames = _renames().annotate(table_match=matches).filter(table_match=True)
            starts = [
                t
                for tables in renames.values_list("tables", flat=True)
                for t in tables
                if t == value or t.endswith("." + value)
            ]
        # The table under the names it was given later (RENAME TABLE, ALTER TABLE ... RENAME):
        # what happened to `orders_old` after `orders` became it is part of the history of `orders`.
        for later, since in renamed_to(starts):
            match |= Q(tables__contains=[later], occurred_at__gte=since)
        return queryset.filter(match)

    def filter_flag(self, queryset: QuerySet[Event], name: str, value: str) -> QuerySet[Event]:
        return queryset.filter(flags__contains=[value.strip()])

    def filter_text(self, queryset: QuerySet[Event], name: str, value: str) -> QuerySet[Event]:
        return queryset.filter(sql__icontains=value)


RENAME_TYPES = ("RENAME TABLE", "ALTER TABLE")
MAX_RENAMES = 100  # a bound on following names, against a log that renames in circles


def _renames() -> QuerySet[Event]:
    """Events that may have renamed tables (rename_pairs says which became which)."""
    return Event.objects.filter(destructive=True, statement_type__in=RENAME_TYPES)


def renamed_to(names: list[str]) -> list[tuple[str, datetime]]:
    """Every later name of these tables, with the time from which it is theirs, in order."""
    found: list[tuple[str, datetime]] = []
    todo: list[tuple[str, datetime | None]] = [(n, None) for n in dict.fromkeys(names)]
    seen = set(names)
    while todo and len(found) < MAX_RENAMES:
        name, since = todo.pop(0)
        renames = _renames().filter(tables__contains=[name], occurred_at__isnull=False)
        if since is not None:
            renames = renames.filter(occurred_at__gte=since)
        rows = renames.order_by("occurred_at", "id").values_list("occurred_at", "sql", "database")
        for when, sql, database in rows:
            for old, new in rename_pairs(sql, database):
                if old == name and new not in seen:
                    seen.add(new)
                    found.append((new, when))
                    todo.append((new, when))
    return found


def filter_events(params: dict | None, queryset: QuerySet[Event] | None = None) -> EventFilter:
    """Apply request parameters to the events; check `.is_valid()`, then use `.qs`."""
    return EventFilter(params, queryset=queryset if queryset is not None else Event.objects.all())


# -- keyset pagination --------------------------------------------------------


@dataclass(frozen=True)
class Page:
    items: list[Event]
    next_cursor: str | None


class BadCursor(ValueError):
    pass


def _encode_cursor(event: Event) -> str:
    when = event.occurred_at.isoformat() if event.occurred_at else None
    return base64.urlsafe_b64encode(json.dumps([when, event.id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime | None, int]:
    try:
        when, pk = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return (datetime.fromisoformat(when) if when is not None else None), int(pk)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as e:
        raise BadCursor("This cursor is not one AuditWeb gave out.") from e


def keyset_page(queryset: QuerySet[Event], cursor: str | None, size: int) -> Page:
    """Newest first (events without a time last), then by id; `cursor` continues a listing.

    Keyset, not OFFSET: page 1,000 costs what page 1 costs, and rows ingested
    meanwhile never shift what the next page holds.
    """
    queryset = queryset.order_by(F("occurred_at").desc(nulls_last=True), "-id")
    if cursor:
        when, pk = _decode_cursor(cursor)
        if when is None:
            queryset = queryset.filter(occurred_at__isnull=True, id__lt=pk)
        else:
            queryset = queryset.filter(
                Q(occurred_at__lt=when) | Q(occurred_at=when, id__lt=pk) | Q(occurred_at__isnull=True)
            )
    items = list(queryset[: size + 1])
    if len(items) > size:
        return Page(items[:size], _encode_cursor(items[size - 1]))
    return Page(items, None)


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
