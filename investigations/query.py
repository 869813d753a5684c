"""The one query layer: every page, chart, API call and report filters events here.

`EventFilter` turns request parameters into a queryset (validated, never raw SQL
from strings); `keyset_page` walks it newest first with an opaque cursor that
stays stable while ingestion adds rows.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import django_filters
from django import forms
from django.db import OperationalError, connection, transaction
from django.db.models import Count, DateTimeField, Exists, F, Func, Max, Min, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import MD5, Coalesce, NullIf, Right, Upper
from psycopg.errors import QueryCanceled

from ingest.models import Event, Gap, Session
from ingest.sql.renames import rename_pairs

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


BIGINT = 2**63  # PostgreSQL's bigint holds -BIGINT .. BIGINT - 1


class WholeNumberField(forms.IntegerField):
    """Digits only: Django's IntegerField also takes `1.0` as 1."""

    def to_python(self, value: object) -> int | None:
        if isinstance(value, str) and value.strip() and not re.fullmatch(r"\s*[+-]?\d+\s*", value):
            raise forms.ValidationError("A whole number.", code="invalid")
        return super().to_python(value)


class BigIntegerFilter(django_filters.NumberFilter):
    """A whole number a bigint column can hold: `1.5` or `99999999999999999999` is refused (400)
    rather than compared in decimals or sent to PostgreSQL to overflow."""

    field_class = WholeNumberField

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("min_value", -BIGINT)
        kwargs.setdefault("max_value", BIGINT - 1)
        super().__init__(*args, **kwargs)


class StrictBooleanField(forms.NullBooleanField):
    """`true`/`false` (or `1`/`0`, any case); empty is "not given". Django's NullBooleanField reads
    anything else as "not given" too, so `destructive=yes` would silently filter nothing."""

    def to_python(self, value: object) -> bool | None:
        if value in (None, ""):
            return None
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise forms.ValidationError("Give true or false.", code="invalid")

    def validate(self, value: object) -> None:
        pass


class BooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("widget", forms.TextInput)  # (django-filter's reads other words as None)
        super().__init__(*args, **kwargs)


class UtcDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 time, turned into UTC here: PostgreSQL takes offsets up to 15:59 only (Python
    up to 23:59), and a time that is no instant AuditWeb can compare is refused (400)."""

    def to_python(self, value: object) -> datetime | None:
        when = super().to_python(value)
        if when is None:
            return None
        try:
            return when.astimezone(UTC)
        except (OverflowError, ValueError):
            raise forms.ValidationError("This time is out of range.", code="invalid") from None


class TimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


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
}
DEFAULT_SORT = "-time"
SORT_CHOICES = [(f"{sign}{key}", f"{key} {order}") for key in SORT_KEYS
                for sign, order in (("", "ascending"), ("-", "descending"))]  # fmt: skip


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
    items: list
    next_cursor: str | None


class BadCursor(ValueError):
    pass


def _encode_cursor(row: Event | Session, field: str = "occurred_at") -> str:
    when = getattr(row, field)
    when = when.isoformat() if when else None
    return base64.urlsafe_b64encode(json.dumps([when, row.id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime | None, int]:
    try:
        when, pk = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        when = datetime.fromisoformat(when) if when is not None else None
        if not isinstance(pk, int) or not 0 <= pk < 2**63 or (when is not None and when.tzinfo is None):
            raise ValueError("not a cursor")
        return when, pk
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError, RecursionError) as e:
        raise BadCursor("This cursor is not one AuditWeb gave out.") from e


def keyset_page(queryset: QuerySet, cursor: str | None, size: int, field: str = "occurred_at") -> Page:
    """Newest first (rows without a time last), then by id; `cursor` continues a listing.

    Keyset, not OFFSET: page 1,000 costs what page 1 costs, and rows ingested
    meanwhile never shift what the next page holds. Rows with a time and rows
    without are asked for separately: `ORDER BY occurred_at DESC` (nulls first, the
    order of a backward scan) walks the (occurred_at, record_hash) index and stops
    after one page, where `DESC NULLS LAST` would sort every matching row first.
    """
    timed: QuerySet | None = queryset.filter(**{f"{field}__isnull": False}).order_by(f"-{field}", "-id")
    untimed = queryset.filter(**{f"{field}__isnull": True}).order_by("-id")
    if cursor:
        when, pk = _decode_cursor(cursor)
        if when is None:
            timed, untimed = None, untimed.filter(id__lt=pk)
        else:
            timed = timed.filter(Q(**{f"{field}__lt": when}) | Q(**{field: when, "id__lt": pk}))  # type: ignore[union-attr]
    items = list(timed[: size + 1]) if timed is not None else []
    if len(items) <= size:
        items += list(untimed[: size + 1 - len(items)])
    if len(items) > size:
        return Page(items[:size], _encode_cursor(items[size - 1], field))
    return Page(items, None)


def sorted_page(queryset: QuerySet[Event], sort: str, cursor: str | None, size: int) -> Page:
    """A page of events in the order `sort` names (one of SORT_CHOICES), after `cursor`.

    `-time` is `keyset_page` (the time index, newest first). Any other order is keyset too, on
    (key, time newest first, id), so pages stay stable while ingestion adds rows; its cursor names
    the sort, and a cursor of another order is refused. A column other than time has no index
    (full indexes slow ingestion): PostgreSQL reads every matching event and keeps the best
    page in a top-N heap, so the cost grows with the matches, bounded by the caller's time limit.
    """
    if sort == DEFAULT_SORT:
        return keyset_page(queryset, cursor, size)
    descending, key = sort.startswith("-"), sort.lstrip("-")
    if key not in SORT_KEYS:
        raise BadCursor(f"No such sort: {sort}.")
    after = _decode_sorted_cursor(cursor, sort) if cursor else None
    if key == "time":
        newest = (
            F("occurred_at").desc(nulls_last=True) if descending else F("occurred_at").asc(nulls_last=True)
        )
        queryset = queryset.order_by(newest, "-id" if descending else "id")
        if after is not None:
            queryset = queryset.filter(_after_time(after[1], after[2], descending))
    else:
        queryset = queryset.annotate(sort_key=SORT_KEYS[key]).order_by(
            "-sort_key" if descending else "sort_key", F("occurred_at").desc(nulls_last=True), "-id"
        )
        if after is not None:
            value, when, pk = after
            beyond = Q(sort_key__lt=value) if descending else Q(sort_key__gt=value)
            queryset = queryset.filter(beyond | Q(sort_key=value) & _after_time(when, pk, True))
    items = list(queryset[: size + 1])
    if len(items) > size:
        last = items[size - 1]
        value = getattr(last, "sort_key", None)
        return Page(items[:size], _encode_sorted_cursor(sort, value, last.occurred_at, last.id))
    return Page(items, None)


def _after_time(when: datetime | None, pk: int, descending: bool) -> Q:
    """Rows after (when, pk) in time order (`descending`: newest first), unknown times last."""
    if when is None:
        return Q(occurred_at__isnull=True) & (Q(id__lt=pk) if descending else Q(id__gt=pk))
    if descending:
        return Q(occurred_at__lt=when) | Q(occurred_at=when, id__lt=pk) | Q(occurred_at__isnull=True)
    return Q(occurred_at__gt=when) | Q(occurred_at=when, id__gt=pk) | Q(occurred_at__isnull=True)


def _encode_sorted_cursor(sort: str, value: str | None, when: datetime | None, pk: int) -> str:
    data = {"sort": sort, "key": value, "time": when.isoformat() if when else None, "id": pk}
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _decode_sorted_cursor(cursor: str, sort: str) -> tuple[str | None, datetime | None, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(data, dict):
            raise ValueError("not a cursor")
        value, when, pk = data["key"], data["time"], data["id"]
        when = datetime.fromisoformat(when) if when is not None else None
        if not isinstance(pk, int) or not 0 <= pk < 2**63 or (when is not None and when.tzinfo is None):
            raise ValueError("not a cursor")
        if not (value is None or isinstance(value, str)) or (value is None) != (sort.lstrip("-") == "time"):
            raise ValueError("not a cursor")
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError) as e:
        raise BadCursor("This cursor is not one AuditWeb gave out.") from e
    if data.get("sort") != sort:
        raise BadCursor("This cursor belongs to another sort order: start again from the first page.")
    return value, when, pk


def oldest_first_page(queryset: QuerySet[Event], cursor: str | None, size: int) -> Page:
    """In log order (time, then id; events without a time by id, last): a session's statements."""
    queryset = queryset.order_by(F("occurred_at").asc(nulls_last=True), "id")
    if cursor:
        when, pk = _decode_cursor(cursor)
        if when is None:
            queryset = queryset.filter(occurred_at__isnull=True, id__gt=pk)
        else:
            queryset = queryset.filter(
                Q(occurred_at__gt=when) | Q(occurred_at=when, id__gt=pk) | Q(occurred_at__isnull=True)
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


# -- counts and the timeline ----------------------------------------------------


class TooSlow(Exception):
    """PostgreSQL cancelled a query that ran past its time limit (`time_limit`)."""


@contextmanager
def time_limit(milliseconds: int) -> Iterator[None]:
    """Run the block's queries in a transaction whose statements PostgreSQL stops after `milliseconds`.

    Counting and charting a filter over the whole store could take seconds; a page would
    rather say so (and ask for a narrower time range) than keep the investigator waiting.
    """
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(milliseconds)])
            yield
    except OperationalError as e:
        if isinstance(e.__cause__, QueryCanceled):
            raise TooSlow(str(e)) from e
        raise


def count_upto(queryset: QuerySet[Event], limit: int) -> tuple[int, bool]:
    """How many events match, counting no further than `limit`: (count, whether there are more).

    `SELECT count(*) FROM (... LIMIT limit + 1)` stops reading once it knows "more than limit".
    """
    found = queryset.order_by().values("pk")[: limit + 1].count()
    return min(found, limit), found > limit


BUCKET_WIDTHS = [
    timedelta(seconds=s)
    for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
] + [timedelta(days=d) for d in (2, 7, 14, 28, 91, 364)]
MAX_BUCKETS = 120
MAX_SERIES = 8  # statement types drawn each in its own colour (per side: destructive or not)
GAPS_SHOWN = 50


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
    """The first and last time of the events (two walks of the time index from either end)."""
    bounds = queryset.aggregate(first=Min("occurred_at"), last=Max("occurred_at"))
    return bounds["first"], bounds["last"]


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
    return Timeline(starts, width, _top_series(counts), _gaps_between(starts[0], until, server))


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


def _gaps_between(start: datetime, end: datetime, server: str | None) -> list[Gap]:
    """Gaps (nothing recorded) that overlap [start, end), of one server or all."""
    gaps = Gap.objects.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    if server:
        gaps = gaps.filter(server=server)
    return list(gaps.order_by("started_at")[:GAPS_SHOWN])


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


# -- sessions -----------------------------------------------------------------


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


def renamed_from(name: str) -> list[tuple[str, datetime]]:
    """The names this table had before (one step back), with the time it took this name."""
    found = []
    rows = _renames().filter(tables__contains=[name], occurred_at__isnull=False).order_by("occurred_at", "id")
    for when, sql, database in rows.values_list("occurred_at", "sql", "database"):
        found += [(old, when) for old, new in rename_pairs(sql, database) if new == name]
    return found
