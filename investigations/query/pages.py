"""Pages of a filter's rows by keyset cursors: page 1,000 costs what page 1 costs, and rows stored
meanwhile never shift what the next page holds (docs/architecture.md, "The investigation pages")."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Q, QuerySet

from ingest.models import Event, Session
from investigations.query.filters import DEFAULT_SORT, SORT_KEYS


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
    order of a backward scan) walks the occurred_at btree (event_time_order) and stops
    after one page, where `DESC NULLS LAST` would sort every matching row first.
    """
    timed = queryset.filter(**{f"{field}__isnull": False}).order_by(f"-{field}", "-id")
    untimed = queryset.filter(**{f"{field}__isnull": True}).order_by("-id")
    past_timed = False  # the cursor is in the rows without a time: the timed ones are behind it
    if cursor:
        when, pk = _decode_cursor(cursor)
        if when is None:
            past_timed, untimed = True, untimed.filter(id__lt=pk)
        else:
            timed = timed.filter(Q(**{f"{field}__lt": when}) | Q(**{field: when, "id__lt": pk}))
    items = [] if past_timed else first_rows(timed, size + 1)
    if len(items) <= size:
        items += first_rows(untimed, size + 1 - len(items))
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
    items = first_rows(queryset, size + 1)
    if len(items) > size:
        last = items[size - 1]
        value = getattr(last, "sort_key", None)
        return Page(items[:size], _encode_sorted_cursor(sort, value, last.occurred_at, last.id))
    return Page(items, None)


def first_rows(queryset: QuerySet, n: int) -> list:
    """The first `n` rows of the ordered `queryset`; events are chosen on their narrow rows first.

    Events are the view `ingest_event`, the narrow rows joined to their statements. Asked in one
    query, PostgreSQL joins every matching row before it sorts and cuts (at 10 million events
    sorted by account: all 10 million joined to 4.2 million statements, a hash join spilling to
    disk). So: 1. the ids of the page, in order, with no statement column asked (the view's
    LEFT JOIN on the statement's primary key is then left out, unless the filter or the order
    reads a statement column, when it is needed); 2. those events, whole, by id; 3. put back in
    the order of step 1. Other models are read in one query.
    """
    if queryset.model is not Event:
        return list(queryset[:n])
    ids = list(queryset.values_list("id", flat=True)[:n])
    if not ids:
        return []
    found = {row.id: row for row in queryset.order_by().filter(id__in=ids)}
    return [found[pk] for pk in ids if pk in found]  # (an event deleted in between is left out)


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
    items = first_rows(queryset, size + 1)
    if len(items) > size:
        return Page(items[:size], _encode_cursor(items[size - 1]))
    return Page(items, None)
