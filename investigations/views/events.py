"""An event's page: the statement with its session around it, the proof of its account, its custody
link, and its raw bytes (shown in part, downloaded whole, or revealed to an admin with a reason)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ingest.chunks import MissingBytes
from ingest.custody import link_of_event
from ingest.models import Event
from investigations import trail
from investigations.query.attribution import attribution_proof
from investigations.query.binlog import rows_shown
from investigations.query.oracle import oracle_facts
from investigations.query.sessions import session_context
from investigations.raw import (
    raw_download,
    raw_event,
    raw_refusal,
    raw_withheld,
    reason_error,
    reveal_raw,
    shown_part,
    shown_raw,
)
from investigations.roles import Role, role_required
from investigations.views.precision import HEAD, time_digits

SESSION_CONTEXT = 10  # statements shown before and after an event on its page


@require_GET
@role_required(Role.VIEWER)
def event_detail(request: HttpRequest, event_id: int) -> HttpResponse:
    event = _event_for_page(event_id)
    trail.record(request, trail.Action.EVENT_VIEW, event=event.pk, server=event.server)
    context = _event_context(event, rows_page=whole_number(request.GET.get("rows_page")))
    return render(request, "investigations/event_detail.html", context)


def whole_number(text: str | None) -> int:
    """A page number from the query string (1 when absent or not a number)."""
    return int(text) if text and text.isascii() and text.isdigit() and len(text) < 10 else 1


@require_POST
@role_required(Role.ADMIN)
def event_reveal(request: HttpRequest, event_id: int) -> HttpResponse:
    """An admin's reveal of one event's exact raw bytes, with a reason the audit trail records.
    The page shows them once, in this answer (never cached); nothing else changes."""
    event = _event_for_page(event_id)
    reason = request.POST.get("reason", "")
    context = _event_context(event)
    error = reason_error(reason)
    if error is not None:
        context.update(reveal_error=error, reveal_reason=reason[:1000])
        return render(request, "investigations/event_detail.html", context, status=400)
    revealed = reveal_raw(request, event, reason)
    context.update(
        revealed=True,
        revealed_raw=shown_part(revealed),
        revealed_cut=len(revealed) > settings.SHOWN_MAX_BYTES,
        reveal_reason=reason.strip(),
    )
    response = render(request, "investigations/event_detail.html", context)
    response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
@role_required(Role.VIEWER)
def event_raw(request: HttpRequest, event_id: int) -> HttpResponse:
    """The event's whole raw bytes, as a file (pages show at most SHOWN_MAX_BYTES of them).
    A record that holds a secret is an admin's, by POST with a reason (investigations.raw)."""
    event = raw_event(event_id)
    if event is None:
        raise Http404("No such event.")
    reason = request.POST.get("reason") if request.method == "POST" else None
    refusal = raw_refusal(request, event, reason)
    if refusal is not None:
        raise PermissionDenied(refusal)
    return raw_download(request, event, reason)


def _event_for_page(event_id: int) -> Event:
    return get_object_or_404(
        Event.objects.select_related("session", "source_file__source", "ingest_run"), pk=event_id
    )


def _event_context(event: Event, rows_page: int = 1) -> dict[str, object]:
    before, after = session_context(event, SESSION_CONTEXT)
    context: dict[str, object] = {"event": event, "before": before, "after": after}
    try:
        event.raw  # noqa: B018  (read once here: the page says so when the store lost them)
    except MissingBytes as e:
        context["raw_missing"] = str(e)
        event.__dict__["_raw"] = b""  # for this page only, whose raw section says they are gone
    context["binlog"] = rows_shown(event, rows_page)
    context["oracle"] = oracle_facts(event)
    context["context_size"] = SESSION_CONTEXT
    context["proof"] = attribution_proof(event)
    context["custody"] = link_of_event(
        event_id=event.pk, source_file_id=event.source_file_id, byte_offset=event.byte_offset
    )
    context["raw_withheld"] = raw_withheld(event)
    # A record of many MiB is shown in part (SHOWN_MAX_BYTES); the page says so and links the whole.
    context["shown_raw"] = shown_part(shown_raw(event))
    context["raw_length"] = len(event.raw)
    context["raw_cut"] = context["raw_length"] > settings.SHOWN_MAX_BYTES
    context["shown_sql"] = shown_part(event.sql)
    context["sql_cut"] = len(event.sql) > settings.SHOWN_MAX_BYTES
    context["shown_max"] = settings.SHOWN_MAX_BYTES
    context["time_digits"] = event_time_digits(event)
    return context


def event_time_digits(event: Event) -> int | None:
    """Digits after the second the event's log wrote its time with (views.precision):
    every page that shows one event's own time shows it to that precision, not the store's."""
    source = event.source_file.source
    return time_digits(bytes(event.raw[:HEAD]), source.format, source.kind)
