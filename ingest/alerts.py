"""Alerts for SIEM polling: destructive, anti-forensic and privilege-changing events, and sources
that became unhealthy, in the order they became visible, with a cursor that never skips one.

Why not simply "id greater than the last one seen": ids are handed out when rows are
written, but transactions commit in another order. Two workers ingest at once; the one
holding ids 100-119 commits after the one holding 120-139, and a poller that read 139 in
between would never see 100-119. So alerts are numbered (`position`) by a trigger that
first takes one transaction-level advisory lock (ALERT_LOCK_KEY), held until the
transaction ends: a transaction numbering alerts waits until the one before it has
committed, so positions become visible in order, and "after position N" is a cursor that
misses nothing and repeats nothing. What it costs: transactions that raise alerts take
turns between their first alert and their commit (for an ingest batch: its last
statements, milliseconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.utils import timezone

from ingest.models import Alert, Source

# Which alert an event raises, most serious first (an event raises one).
EVENT_ALERT_FLAGS = (Alert.Kind.ANTI_FORENSIC.value, Alert.Kind.PRIVILEGE_CHANGE.value)

# (time, record hash, kind) of events to alert on, as the store writer has them.
AlertKey = tuple[datetime | None, bytes, str]

_INSERT_TIMED = """
INSERT INTO ingest_alert (kind, server, occurred_at, created_at, event_id, reason)
SELECT k.kind, e.server, e.occurred_at, now(), e.id, ''
FROM unnest(%s::timestamptz[], %s::bytea[], %s::varchar[]) AS k(t, h, kind)
JOIN ingest_event e ON e.occurred_at = k.t AND e.record_hash = k.h
ON CONFLICT (event_id) DO NOTHING
"""
_INSERT_UNTIMED = """
INSERT INTO ingest_alert (kind, server, occurred_at, created_at, event_id, reason)
SELECT k.kind, e.server, NULL, now(), e.id, ''
FROM unnest(%s::bytea[], %s::varchar[]) AS k(h, kind)
JOIN ingest_event e ON e.occurred_at IS NULL AND e.record_hash = k.h
ON CONFLICT (event_id) DO NOTHING
"""


def event_alert_kind(destructive: bool, flags: set[str] | frozenset[str]) -> str | None:
    """The alert an event raises, if any."""
    for flag in EVENT_ALERT_FLAGS:
        if flag in flags:
            return flag
    return Alert.Kind.DESTRUCTIVE.value if destructive else None


def raise_event_alerts(keys: Sequence[AlertKey]) -> None:
    """One alert for each of these events, in the transaction that stored them. An event
    stored before (the same bytes read again) has its alert already: none is added."""
    timed = [k for k in keys if k[0] is not None]
    untimed = [k for k in keys if k[0] is None]
    with connection.cursor() as cur:
        if timed:
            cur.execute(
                _INSERT_TIMED, [[t for t, _, _ in timed], [h for _, h, _ in timed], [k for *_, k in timed]]
            )
        if untimed:
            cur.execute(_INSERT_UNTIMED, [[h for _, h, _ in untimed], [k for *_, k in untimed]])


def note_source_health(source: Source, state: str, reasons: list[str], kinds: list[str]) -> Alert | None:
    """Raise an alert when a source becomes unhealthy, when the kind of trouble changes, and when
    it is healthy again; not on every look (a silence that goes on is one alert).

    `kinds` name the troubles without their figures (e.g. "silent", "vanished"), so that
    "no new data for 2 h" and "for 3 h" are the same trouble.
    """
    signature = ",".join(sorted(kinds)) if state == "unhealthy" else ""
    claimed = (
        Source.objects.filter(pk=source.pk).exclude(health_alerted=signature).update(health_alerted=signature)
    )
    if not claimed:  # nothing changed, or another process raised this alert already
        return None
    if signature:
        reason = "; ".join(reasons)
    else:
        reason = "healthy again" if state in ("ok", "waiting") else f"no longer watched ({state})"
    return Alert.objects.create(
        kind=Alert.Kind.SOURCE_HEALTH,
        server=source.server,
        occurred_at=timezone.now(),
        source=source,
        reason=reason[:2000],
    )


# -- the feed ------------------------------------------------------------------------------------

ALERT_LOCK_KEY = 0x41575F41  # "AW_A": the trigger of migration 0010 takes it before numbering


class BadCursor(ValueError):
    pass


@dataclass(frozen=True)
class AlertPage:
    items: list[Alert]
    next_cursor: str | None  # the cursor after the last item (the one given when the page is empty)
    more: bool  # another page is ready now


def alert_cursor(alert: Alert) -> str:
    return str(alert.position)


def alerts_after(cursor: str | None, size: int) -> AlertPage:
    """The alerts after `cursor` (from the first one when None), at most `size`, in order."""
    alerts = Alert.objects.select_related("event__session", "event__source_file", "source").order_by(
        "position"
    )
    if cursor:
        if not cursor.isdigit() or len(cursor) > 19:
            raise BadCursor("This cursor is not one AuditWeb gave out.")
        alerts = alerts.filter(position__gt=int(cursor))
    items = list(alerts[: size + 1])
    more = len(items) > size
    items = items[:size]
    return AlertPage(items, alert_cursor(items[-1]) if items else cursor, more)
