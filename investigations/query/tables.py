"""The tables the events mention: the kept list (TableSeen), what came since, and its rebuild."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from ingest.models import Event
from investigations.models import TableCatalogue, TableSeen
from investigations.query.filters import like_escape

REFRESH_AFTER = timedelta(minutes=5)  # a list older than this is rebuilt in the background
REFRESH_STALE = timedelta(minutes=30)  # a rebuild claimed longer ago than this died: claim it again
FRESH_MAX = 200_000  # newest events looked through on the fly for names the list lacks


@dataclass(frozen=True)
class TableList:
    tables: list[TableSeen]  # names matching the search, in name order
    more: bool  # there are more than were asked for
    refreshed_at: datetime | None  # when the kept counts were made (None: never)
    unlisted: int  # events stored since, too many to look through now (0: none left out)


def catalogue() -> TableCatalogue:
    return TableCatalogue.objects.get_or_create(pk=1)[0]


def tables_seen(search: str, limit: int, after: str = "") -> TableList:
    """Table names containing `search` (any case): the kept list, plus names that only events
    stored after its last rebuild mention (looked up on the fly when there are not too many).
    `after` continues a listing: only names that sort after it."""
    state = catalogue()
    kept = TableSeen.objects.order_by("name")
    if search:
        kept = kept.filter(name__icontains=search)
    if after:
        kept = kept.filter(name__gt=after)
    tables = list(kept[: limit + 1])
    # Events stored since the last rebuild, counted up to FRESH_MAX + 1 (the event_id index finds
    # them; ids are not dense, so their difference would overstate it).
    unlisted = Event.objects.filter(id__gt=state.upto_id).values("id")[: FRESH_MAX + 1].count()
    if unlisted > FRESH_MAX:  # too many: say about how many, from the ids
        newest = Event.objects.aggregate(last=Max("id"))["last"] or 0
        unlisted = max(unlisted, newest - state.upto_id)
    elif unlisted:
        known = {t.name for t in tables}
        for t in _names_after(state.upto_id, search, limit + 1, after):
            if t.name not in known:
                tables.append(t)
        tables.sort(key=lambda t: t.name)
        unlisted = 0
    return TableList(tables[:limit], len(tables) > limit, state.refreshed_at, unlisted)


def _names_after(after_id: int, search: str, limit: int, after_name: str = "") -> list[TableSeen]:
    """Names in events with ids above `after_id` (the event_id index finds them), counted there."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.name, count(*), count(*) FILTER (WHERE e.destructive), min(e.occurred_at),"
            " max(e.occurred_at) FROM ingest_event e, unnest(e.tables) AS t(name)"
            " WHERE e.id > %s AND t.name ILIKE %s ESCAPE '\\' AND t.name > %s"
            " GROUP BY t.name ORDER BY t.name LIMIT %s",
            [after_id, "%" + like_escape(search) + "%", after_name, limit],
        )
        rows = cursor.fetchall()
    return [TableSeen(name=n, events=c, destructive=d, first_at=f, last_at=la) for n, c, d, f, la in rows]


def tables_seen_refresh() -> int:
    """Rebuild the kept list from every event (one pass over the store); returns the names kept.

    Events up to the highest id at the start are counted; names of events whose transaction
    was still open then (ids below it, committed later) come with the next rebuild."""
    with transaction.atomic():
        upto = Event.objects.aggregate(last=Max("id"))["last"] or 0
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE TEMPORARY TABLE tables_seen_now ON COMMIT DROP AS"
                " SELECT t.name, count(*) AS events, count(*) FILTER (WHERE e.destructive) AS destructive,"
                " min(e.occurred_at) AS first_at, max(e.occurred_at) AS last_at"
                " FROM ingest_event e, unnest(e.tables) AS t(name) WHERE e.id <= %s GROUP BY t.name",
                [upto],
            )
            cursor.execute(
                "INSERT INTO investigations_tableseen (name, events, destructive, first_at, last_at)"
                " SELECT name, events, destructive, first_at, last_at FROM tables_seen_now"
                " ON CONFLICT (name) DO UPDATE SET events = EXCLUDED.events,"
                " destructive = EXCLUDED.destructive, first_at = EXCLUDED.first_at,"
                " last_at = EXCLUDED.last_at"
            )
            # Names no event mentions any more (a partition detached and dropped).
            cursor.execute(
                "DELETE FROM investigations_tableseen s"
                " WHERE NOT EXISTS (SELECT 1 FROM tables_seen_now n WHERE n.name = s.name)"
            )
            cursor.execute("SELECT count(*) FROM tables_seen_now")
            kept = cursor.fetchone()[0]
        catalogue()
        done = {"upto_id": upto, "refreshed_at": timezone.now(), "refreshing_since": None}
        TableCatalogue.objects.filter(pk=1).update(**done)
    return kept


def tables_seen_refresh_due(queue: Callable[[], None]) -> bool:
    """Queue a rebuild when the list is older than REFRESH_AFTER and events came since, unless
    one is under way: claimed by one conditional UPDATE, so two pages never queue two."""
    state = catalogue()
    now = timezone.now()
    if state.refreshed_at and now - state.refreshed_at < REFRESH_AFTER:
        return False
    if (Event.objects.aggregate(last=Max("id"))["last"] or 0) <= state.upto_id:
        return False
    claimed = TableCatalogue.objects.filter(
        Q(refreshing_since__isnull=True) | Q(refreshing_since__lt=now - REFRESH_STALE), pk=1
    ).update(refreshing_since=now)
    if claimed:
        transaction.on_commit(queue)
    return bool(claimed)
