"""Sessions (one connection of one server boot): the list, and one session statement by statement."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ingest.models import Event, Session
from investigations import trail
from investigations.query.filters import filter_events
from investigations.query.pages import BadCursor, keyset_page, oldest_first_page
from investigations.query.sessions import (
    TRANSACTION_ENDS,
    TRANSACTION_STARTS,
    filter_sessions,
    statement_counts,
    transaction_open_before,
)
from investigations.roles import Role, role_required
from investigations.views.events import event_time_digits
from investigations.views.shared import htmx_template

SESSIONS_PAGE = 50
STATEMENTS_PAGE = 200


def _get_session(request: HttpRequest, session_id: int) -> Session:
    return get_object_or_404(Session, pk=session_id)


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def session_list(request: HttpRequest) -> HttpResponse:
    flt = filter_sessions(request.GET)
    page, error = None, None
    if flt.is_valid():
        try:
            page = keyset_page(flt.qs, request.GET.get("cursor"), SESSIONS_PAGE, field="started_at")
        except BadCursor as e:
            error = str(e)
    counts = statement_counts([s.pk for s in page.items]) if page else {}
    rows = [(s, *counts.get(s.pk, (0, 0))) for s in page.items] if page else []
    next_query = None
    if page and page.next_cursor:
        params = request.GET.copy()
        params["cursor"] = page.next_cursor
        next_query = params.urlencode()
    context = {
        "filter": flt,
        "rows": rows,
        "error": error,
        "next_query": next_query,
        "first_page": not request.GET.get("cursor"),
        "has_sessions": Session.objects.exists(),
        # In the context, not only set by the page's template: htmx's swap renders just the partial.
        "zone": timezone.get_current_timezone_name(),
    }
    return render(request, htmx_template(request, "investigations/session_list.html", "sessions"), context)


def _mark_transactions(events: list[Event], open_before: bool) -> None:
    """Set `tx` on each event: "begin", "commit", "rollback", "inside" (an explicit transaction is
    open) or "" (autocommit), for the page's brackets."""
    inside = open_before
    for e in events:
        if e.statement_type in TRANSACTION_STARTS:
            e.tx, inside = "begin", True  # type: ignore[attr-defined]  # for the template only
        elif e.statement_type in TRANSACTION_ENDS:
            e.tx, inside = e.statement_type.lower(), False  # type: ignore[attr-defined]  # template only
        else:
            e.tx = "inside" if inside else ""  # type: ignore[attr-defined]  # for the template only


def _logged_digits(session: Session, when: datetime | None) -> int | None:
    """The precision the session's log wrote `when` with: that of the session's record at that
    time (its Connect, its Quit). None when no stored record has it (then all six digits show)."""
    if when is None:
        return None
    records = Event.objects.filter(session_id=session.pk, occurred_at=when)
    record = records.select_related("source_file__source").order_by("id").first()
    return event_time_digits(record) if record else None


@require_GET
@role_required(Role.VIEWER)
def session_detail(request: HttpRequest, session_id: int) -> HttpResponse:
    """Every statement of one connection in log order, its transactions bracketed."""
    session = _get_session(request, session_id)
    trail.record(request, trail.Action.SESSION_VIEW, session=session.pk, server=session.server)
    events = filter_events({}, Event.objects.filter(session_id=session.pk)).qs.defer(
        "raw_inline", "fingerprint"
    )
    total, destructive = statement_counts([session.pk]).get(session.pk, (0, 0))
    try:
        page = oldest_first_page(events, request.GET.get("cursor"), STATEMENTS_PAGE)
    except BadCursor as e:
        context = {"session": session, "error": str(e), "total": total, "destructive": destructive}
        return render(request, "investigations/session_detail.html", context, status=400)
    if page.items and page.items[0].occurred_at is not None:
        _mark_transactions(page.items, transaction_open_before(page.items[0]))
    else:
        _mark_transactions(page.items, False)
    next_query = None
    if page.next_cursor:
        params = request.GET.copy()
        params["cursor"] = page.next_cursor
        next_query = params.urlencode()
    context = {
        "session": session,
        "started_digits": _logged_digits(session, session.started_at),
        "ended_digits": _logged_digits(session, session.ended_at),
        "page": page,
        "next_query": next_query,
        "first_page": not request.GET.get("cursor"),
        "total": total,
        "destructive": destructive,
    }
    return render(request, "investigations/session_detail.html", context)
