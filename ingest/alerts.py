"""Alerts for SIEM polling: destructive, anti-forensic and privilege-changing events, and sources
that became unhealthy, in the order they became visible, with a cursor that never skips one.

Why not simply "id greater than the last one seen": ids are handed out when rows are
written, but transactions commit in another order. Two workers ingest at once; the one
holding ids 100-119 commits after the one holding 120-139, and a poller that read 139 in
between would never see 100-119. So alerts are numbered (`position`, a sequence) only
after a statement trigger has taken one transaction-level advisory lock (ALERT_LOCK_KEY),
held until the transaction ends: a transaction numbering alerts waits until the one
before it has committed, so positions become visible in order, and "after position N" is
a cursor that misses nothing and repeats nothing. What it costs: transactions that raise
alerts take turns between their first alert and their commit (for an ingest batch: its
last statements, milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from ingest.models import Alert, Event, Source

# Which alert an event raises, most serious first (an event raises one).
EVENT_ALERT_FLAGS = (Alert.Kind.ANTI_FORENSIC.value, Alert.Kind.PRIVILEGE_CHANGE.value)
# The same, in SQL over an event row (the store's writer and migration 0010 use it).
KIND_SQL = (
    "CASE WHEN 'anti_forensic' = ANY(flags) THEN 'anti_forensic'"
    " WHEN 'privilege_change' = ANY(flags) THEN 'privilege_change' ELSE 'destructive' END"
)
WORTH_SQL = "(destructive OR flags && ARRAY['anti_forensic', 'privilege_change']::varchar[])"


def event_alert_kind(destructive: bool, flags: set[str] | frozenset[str]) -> str | None:
    """The alert an event raises, if any."""
    for flag in EVENT_ALERT_FLAGS:
        if flag in flags:
            return flag
    return Alert.Kind.DESTRUCTIVE.value if destructive else None


def note_source_health(source: Source, state: str, reasons: list[str], kinds: list[str]) -> Alert | None:
    """Raise an alert when a source becomes unhealthy, when the kind of trouble changes, and when
    it is healthy again; not on every look (a silence that goes on is one alert).

    `kinds` name the troubles without their figures (e.g. "silent", "vanished"), so that
    "no new data for 2 h" and "for 3 h" are the same trouble.
    """
    signature = ",".join(sorted(kinds)) if state == "unhealthy" else ""
    if signature:
        reason = "; ".join(reasons)
    else:
        reason = "healthy again" if state in ("ok", "waiting") else f"no longer watched ({state})"
    with transaction.atomic():  # the new state and its alert, or neither
        changed = Source.objects.filter(pk=source.pk).exclude(health_alerted=signature)
        if not changed.update(health_alerted=signature):  # as it was, or another process said it
            return None
        # (position and created_at come back from the database: their defaults are its own)
        return Alert.objects.create(
            kind=Alert.Kind.SOURCE_HEALTH, server=source.server, source=source, reason=reason[:2000]
        )


# -- the feed ------------------------------------------------------------------------------------

ALERT_LOCK_KEY = 0x41575F41  # "AW_A": migration 0010's trigger takes it before rows are numbered


class BadCursor(ValueError):
    pass


@dataclass(frozen=True)
class AlertPage:
    items: list[Alert]
    next_cursor: str | None  # the cursor after the last item (the one given when the page is empty)
    more: bool  # another page is ready now


def alert_cursor(alert: Alert) -> str:
    return str(alert.position)


def alerts_after(cursor: str | None, size: int, *, with_events: bool = True) -> AlertPage:
    """The alerts after `cursor` (from the first one when None), at most `size`, in order; each
    event alert with its event as `alert.event` (None for health alerts), unless `with_events` is
    False (the API looks the events up itself, as JSON: `investigations.export.events_as_api`)."""
    alerts = Alert.objects.select_related("source").order_by("position")
    if cursor:
        if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 18:  # ("²" is a digit to isdigit)
            raise BadCursor("This cursor is not one AuditWeb gave out.")
        alerts = alerts.filter(position__gt=int(cursor))
    items = list(alerts[: size + 1])
    more = len(items) > size
    items = items[:size]
    if not with_events:
        return AlertPage(items, alert_cursor(items[-1]) if items else cursor, more)
    events = _events_of(items)
    for alert in items:
        alert.event = events.get(alert.event_id) if alert.event_id else None  # type: ignore[attr-defined]  # not a field: for AlertSerializer
    return AlertPage(items, alert_cursor(items[-1]) if items else cursor, more)


def _events_of(alerts: list[Alert]) -> dict[int, Event]:
    """The events of these alerts, by id: one query through the events' id index."""
    ids = [a.event_id for a in alerts if a.event_id is not None]
    if not ids:
        return {}
    events = Event.objects.filter(pk__in=ids).select_related("session", "source_file").defer("raw_inline")
    return {e.pk: e for e in events}
