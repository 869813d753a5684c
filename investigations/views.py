"""Server-rendered pages. HTMX asks the same view for a named partial of the same template."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ingest.models import Event
from investigations.query import BadCursor, filter_events, keyset_page, session_context

PAGE_SIZE = 50
KEPT_FILTERS = ("session", "server", "host", "database", "connection_id", "flag")
SESSION_CONTEXT = 10  # statements shown before and after an event on its page


@require_GET
@login_required
@vary_on_headers("HX-Request")
def event_list(request: HttpRequest) -> HttpResponse:
    flt = filter_events(request.GET)
    page = None
    error = None
    if flt.is_valid():
        try:
            page = keyset_page(
                flt.qs.select_related("session", "source_file"), request.GET.get("cursor"), PAGE_SIZE
            )
        except BadCursor as e:
            error = str(e)
    next_query = None
    if page and page.next_cursor:
        params = request.GET.copy()
        params["cursor"] = page.next_cursor
        next_query = params.urlencode()
    newest = request.GET.copy()
    newest.pop("cursor", None)
    # Filters that links set (a session, a host...) but the form has no field for: kept as hidden
    # inputs, so that changing another filter narrows within them, each with a link to drop it.
    kept = []
    for name in KEPT_FILTERS:
        value = request.GET.get(name, "").strip()
        if value:
            without = newest.copy()
            without.pop(name)
            kept.append({"name": name, "value": value, "drop_query": without.urlencode()})
    template = "investigations/event_list.html"
    if request.htmx:
        template += "#results"
    context = {
        "filter": flt,
        "page": page,
        "error": error,
        "next_query": next_query,
        "first_page": not request.GET.get("cursor"),
        "newest_query": newest.urlencode(),
        "has_events": Event.objects.exists(),
        "kept_filters": kept,
    }
    return render(request, template, context)


@require_GET
@login_required
def event_detail(request: HttpRequest, event_id: int) -> HttpResponse:
    event = get_object_or_404(Event.objects.select_related("session", "source_file"), pk=event_id)
    before, after = session_context(event, SESSION_CONTEXT)
    context = {"event": event, "before": before, "after": after, "context_size": SESSION_CONTEXT}
    return render(request, "investigations/event_detail.html", context)
