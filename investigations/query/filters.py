"""The one event filter: every page, chart, API call and report narrows events with `filter_events`.

`EventFilter` turns request parameters into a queryset (validated, never raw SQL from strings);
the pages walk it with `investigations.query.pages`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import django_filters
from django.db.models import CharField, F, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import MD5, Cast, Coalesce, LPad, NullIf, Right, Upper

from ingest.models import BinlogStatement, Event
from investigations.query.fields import BigIntegerFilter, BooleanFilter, TimeFilter
from investigations.query.renames import rename_events, renamed_to

STATEMENT_TYPES = [
    "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "TRUNCATE", "DROP TABLE", "DROP DATABASE",
    "DROP VIEW", "ALTER TABLE", "RENAME TABLE", "CREATE TABLE", "GRANT", "REVOKE", "SET", "CALL",
    "LOAD DATA", "CREATE USER", "DROP USER", "ALTER USER", "SET PASSWORD", "BEGIN", "COMMIT", "ROLLBACK",
]  # fmt: skip

# What a statement type looks like (the classifier's upper-case verb phrases); the API documents it.
STATEMENT_TYPE_PATTERN = "^[A-Z][A-Z_ ]{0,59}$"
STATEMENT_TYPE = re.compile(STATEMENT_TYPE_PATTERN.strip("^$"))

# Flags the pipeline sets (README "Flags on events"), offered by the explorer's form.
FLAGS = [
    "anti_forensic", "privilege_change", "no_where", "rolled_back", "failed", "unattributed",
    "multi_table", "multi_statement", "routine", "in_routine", "prepared", "unparsed", "time_unknown",
    "sql_truncated", "continued_after_quiet", "secret_masked",
]  # fmt: skip

# Columns the explorer and the API sort by (`sort=server`, `sort=-server`): each a text value of
# the event (never NULL, so that keyset comparisons hold), ties in time order, newest first.
SORT_KEYS: dict[str, object] = {
    "time": None,  # occurred_at itself
    "server": F("server"),
    "user": Coalesce("user", Value("")),
    "host": Coalesce("host", Value("")),
    "database": Coalesce("database", Value("")),
    "type": Coalesce(NullIf("statement_type", Value("")), "command"),  # as the Type column shows it
    "table": Coalesce(F("tables__0"), Value("")),  # the first table the statement names
    # The rows linked to it for sure (rows_changed), zero-padded so that text order is number
    # order; '' where none are (no binlog, nothing changed, or only ambiguously its): last when
    # the biggest come first.
    "rows": Coalesce(
        LPad(
            Cast(
                Subquery(
                    BinlogStatement.objects.filter(event_id=OuterRef("id"))
                    .order_by()
                    .values("event_id")
                    .annotate(n=Sum("rows"))
                    .values("n")
                ),
                CharField(),
            ),
            20,
            Value("0"),
        ),
        Value(""),
    ),
}
DEFAULT_SORT = "-time"
SORT_CHOICES = [(f"{sign}{key}", f"{key} {order}") for key in SORT_KEYS
                for sign, order in (("", "ascending"), ("-", "descending"))]  # fmt: skip


def like_escape(text: str) -> str:
    """`text` as a LIKE pattern that matches it literally (with `ESCAPE '\\'`)."""
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
        help_text="Statement type (repeatable), upper case as the classifier names it: DELETE, DROP TABLE...",
    )
    destructive = BooleanFilter(field_name="destructive", help_text="Only (or no) destructive")
    flag = django_filters.CharFilter(method="filter_flag", help_text="A flag, e.g. no_where or unattributed")
    connection_id = BigIntegerFilter(
        field_name="connection_id", help_text="The server's connection (thread) id"
    )
    session = django_filters.CharFilter(
        field_name="session__key", help_text="Session key `server/boot/connection id`, exactly"
    )
    since = TimeFilter(field_name="occurred_at", lookup_expr="gte", help_text="ISO 8601")
    until = TimeFilter(field_name="occurred_at", lookup_expr="lt", help_text="ISO 8601")
    q = django_filters.CharFilter(method="filter_text", help_text="Text in the SQL (case-insensitive)")
    sort = django_filters.ChoiceFilter(
        method="filter_sort",
        choices=SORT_CHOICES,
        help_text="Order of the pages: a column, `-` first for descending (default `-time`, newest first)",
    )
    rows_changed_min = BigIntegerFilter(
        method="filter_rows_changed",
        min_value=1,
        help_text="Only events whose binary log rows (`rows_changed`) number at least this (1 or more)",
    )
    fingerprint = django_filters.CharFilter(
        method="filter_fingerprint",
        help_text="A statement fingerprint, exactly, or its query id `0x` + 16 hex digits (the digest's)",
    )

    class Meta:
        model = Event
        fields: list[str] = []

    @property
    def sort_order(self) -> str:
        """The valid sort asked for, or the default (newest first)."""
        chosen = self.form.cleaned_data.get("sort") if self.is_bound and self.is_valid() else None
        return chosen or DEFAULT_SORT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
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
        # Anything else (lower case, a NUL...) stays no choice, and is refused.
        return [v for v in values if isinstance(v, str) and STATEMENT_TYPE.fullmatch(v)]

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
                (value, "%." + like_escape(value)),
            )
            queryset = queryset.annotate(table_match=matches)
            match = Q(table_match=True)
            renames = rename_events().annotate(table_match=matches).filter(table_match=True)
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

    def filter_rows_changed(self, queryset: QuerySet[Event], name: str, value: int) -> QuerySet[Event]:
        # The blast radius: the events with rows linked to them for sure (investigations.query.binlog).
        linked = (
            BinlogStatement.objects.filter(event_id__isnull=False)
            .values("event_id")
            .annotate(n=Sum("rows"))
            .filter(n__gte=value)
            .values("event_id")
        )
        return queryset.filter(id__in=Subquery(linked))

    def filter_sort(self, queryset: QuerySet[Event], name: str, value: str) -> QuerySet[Event]:
        return queryset  # an order, not a filter: `sorted_page` applies it to a page

    def filter_fingerprint(self, queryset: QuerySet[Event], name: str, value: str) -> QuerySet[Event]:
        if QUERY_ID.fullmatch(value.strip()):
            # A query id keeps links short where a fingerprint may run to kilobytes.
            wanted = value.strip()[2:].upper()
            return queryset.annotate(query_id=Upper(Right(MD5("fingerprint"), 16))).filter(query_id=wanted)
        return queryset.filter(fingerprint=value)


# A fingerprint's short name, as pt-query-digest makes it: the last 16 hex digits of its MD5.
QUERY_ID = re.compile(r"0x[0-9A-Fa-f]{16}")


def query_id(fingerprint: str) -> str:
    """`0x` and the last 16 hex digits (upper case) of the fingerprint's MD5, as pt-query-digest
    names a query class; the `fingerprint` filter takes it for the fingerprint."""
    return "0x" + hashlib.md5(fingerprint.encode(), usedforsecurity=False).hexdigest()[-16:].upper()


def filter_events(params: dict | None, queryset: QuerySet[Event] | None = None) -> EventFilter:
    """Apply request parameters to the events; check `.is_valid()`, then use `.qs`."""
    return EventFilter(params, queryset=queryset if queryset is not None else Event.objects.all())
