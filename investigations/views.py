"""Server-rendered pages: the dashboard, the explorer and an event's page.
HTMX asks the same view for a named partial of the same template."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from ingest.custody import link_of_event
from ingest.models import Event, IngestRun, Source
from ingest.sources import source_health, source_state_counts
from investigations import audit
from investigations.attribution import attribution_proof
from investigations.charts import bucket_rows, chart_data
from investigations.middleware import TZ_COOKIE, zone_named
from investigations.precision import HEAD, time_digits
from investigations.query import (
    FLAGS,
    BadCursor,
    EventFilter,
    TooSlow,
    count_upto,
    filter_events,
    recent_gaps,
    session_context,
    sorted_page,
    time_bounds,
    time_limit,
    timeline,
)
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

PAGE_SIZE = 50
COUNT_LIMIT = 10_000  # beyond this the explorer says "more than 10,000"
PAGE_MS, COUNT_MS, CHART_MS = 15_000, 2_000, 5_000  # PostgreSQL stops a query after this long
CHART_DEFAULT_SPAN = timedelta(days=1)  # charted before the newest event when the filter has no From
KEPT_FILTERS = ("session", "fingerprint")  # set by links, no field in the form: kept as hidden inputs
QUICK_RANGES = {"1h": ("Last hour", timedelta(hours=1)), "24h": ("Last 24 hours", timedelta(days=1)),
                "7d": ("Last 7 days", timedelta(days=7))}  # fmt: skip
SESSION_CONTEXT = 10  # statements shown before and after an event on its page
DASHBOARD_NEWEST = 10
ACTIVE_RUNS = (IngestRun.Status.QUEUED, IngestRun.Status.RUNNING)
ORIGIN = datetime(1970, 1, 5)  # a Monday: chart buckets of days and weeks start at the viewer's midnight


def htmx_template(request: HttpRequest, template: str, partial: str) -> str:
    """The named partial for htmx's swaps; the whole page for browsers, and for htmx restoring
    history (it asks for the page it lost)."""
    if request.htmx and not request.htmx.history_restore_request:
        return f"{template}#{partial}"
    return template


WATCHED = {"Destructive": {"destructive": "true"}, "Anti-forensic": {"flag": "anti_forensic"}}


def _recent_counts(now: datetime) -> list[dict[str, object]]:
    """Destructive and anti-forensic events of the last 24 hours and 7 days, each count with the
    explorer's query that lists them (From in the page's zone)."""
    rows = []
    for label, params in WATCHED.items():
        windows = []
        for window, since in (("24 hours", now - timedelta(days=1)), ("7 days", now - timedelta(days=7))):
            count = filter_events({**params, "since": since.isoformat()}).qs.count()
            local = timezone.localtime(since).strftime("%Y-%m-%dT%H:%M:%S")
            query = _urlencode({**params, "since": local, "tz": timezone.get_current_timezone_name()})
            windows.append({"window": window, "count": count, "query": query})
        rows.append({"label": label, "windows": windows})
    return rows


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def dashboard(request: HttpRequest) -> HttpResponse:
    """What needs a look: recent destructive and anti-forensic events, gaps, sources, ingests."""
    newest = filter_events({"destructive": "true"}).qs.filter(occurred_at__isnull=False).defer("raw")
    anti = filter_events({"flag": "anti_forensic"}).qs.filter(occurred_at__isnull=False).defer("raw")
    sources = [(s, source_health(s)) for s in Source.objects.order_by("name")]
    runs = IngestRun.objects.filter(status__in=ACTIVE_RUNS).select_related("source", "source_file")
    context = {
        "counts": _recent_counts(timezone.now()),
        "newest": newest.order_by("-occurred_at", "-id")[:DASHBOARD_NEWEST],
        "anti": anti.order_by("-occurred_at", "-id")[:DASHBOARD_NEWEST],
        "gaps": recent_gaps(DASHBOARD_NEWEST),
        "sources": sources,
        "attention": [(s, h) for s, h in sources if h.needs_attention],
        "source_states": source_state_counts(h for _, h in sources),
        "runs": runs.order_by("started_at"),
        "has_events": Event.objects.exists(),
    }
    return render(request, htmx_template(request, "investigations/dashboard.html", "running"), context)


def _urlencode(params: dict[str, str]) -> str:
    query = QueryDict(mutable=True)
    query.update(params)
    return query.urlencode()


def _quick_range(params: QueryDict) -> QueryDict | None:
    """`range=24h` (a quick pick) as the From/Until it means now, in the page's zone: the URL
    then names the instants, so it shows the same events tomorrow."""
    if params.get("range") not in QUICK_RANGES:
        return None
    until = timezone.localtime().replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = until - QUICK_RANGES[params["range"]][1]
    resolved = params.copy()
    for name in ("range", "cursor"):
        resolved.pop(name, None)
    resolved["since"], resolved["until"] = (t.strftime("%Y-%m-%dT%H:%M:%S") for t in (since, until))
    resolved["tz"] = timezone.get_current_timezone_name()
    return resolved


def _zone_links(request: HttpRequest, flt: EventFilter, params: QueryDict) -> list[dict[str, str]]:
    """Links showing the same view in UTC, the browser's zone or the server's: the From/Until
    are converted, so each link means the same instants."""
    current = timezone.get_current_timezone_name()
    names = ["UTC", request.COOKIES.get(TZ_COOKIE, ""), settings.TIME_ZONE]
    cleaned = flt.form.cleaned_data if flt.is_bound and flt.is_valid() else {}
    links = []
    for name in dict.fromkeys(n for n in names if zone_named(n) and n != current):
        query = params.copy()
        query.pop("cursor", None)
        query["tz"] = name
        for field in ("since", "until"):
            if cleaned.get(field):
                query[field] = cleaned[field].astimezone(ZoneInfo(name)).strftime("%Y-%m-%dT%H:%M:%S")
        links.append({"zone": name, "query": query.urlencode()})
    return links


def _chart_range(
    flt: EventFilter, since: datetime | None, until: datetime | None, found: dict[str, object]
) -> tuple[datetime | None, datetime | None]:
    """The chart's range: the filter's From/Until; where one is open, the matching events' first
    or last time, but no more than CHART_DEFAULT_SPAN before the newest when From is open (a
    chart of all of a big store would take seconds). Links offer longer spans (`chart_spans`)."""
    if since and until:
        return since, until
    first, last = time_bounds(flt.qs)
    if last is None:
        return None, None
    until = until or last + timedelta(microseconds=1)
    if since is None and first is not None:
        since = max(first, until - CHART_DEFAULT_SPAN)
        if since > first:
            found["chart_spans"] = _longer_spans(flt, first, until)
    return since, until


def _longer_spans(flt: EventFilter, first: datetime, until: datetime) -> list[dict[str, str]]:
    """Links charting more than the default span: 7 and 30 days back, and from the first event."""
    links = []
    for label, since in (("7 days", until - timedelta(days=7)), ("30 days", until - timedelta(days=30)),
                         ("all", first)):  # fmt: skip
        if since >= first or label == "all":
            query = flt.data.copy()
            query.pop("cursor", None)
            query["since"] = timezone.localtime(since).strftime("%Y-%m-%dT%H:%M:%S")
            query["tz"] = timezone.get_current_timezone_name()
            links.append({"label": label, "query": query.urlencode()})
    return links


def _explore(flt: EventFilter, params: QueryDict) -> dict[str, object]:
    """What the results partial shows: a page of events, the count, the timeline (or why not)."""
    found: dict[str, object] = {}
    if not flt.is_valid():
        return found
    events = flt.qs.select_related("session").defer("raw", "fingerprint")
    try:
        with time_limit(PAGE_MS):
            found["page"] = sorted_page(events, flt.sort_order, params.get("cursor"), PAGE_SIZE)
    except BadCursor as e:
        found["error"] = str(e)
        return found
    except TooSlow:
        found["error"] = "This filter took too long. Narrow the time range, or add a table or a user."
        if flt.sort_order.lstrip("-") != "time":
            found["error"] += " (Sorting by a column other than time reads every matching event.)"
        return found
    if params.get("cursor"):
        return found  # older pages: the count and the chart are the first page's
    since, until = flt.form.cleaned_data.get("since"), flt.form.cleaned_data.get("until")
    server = flt.form.cleaned_data.get("server")
    tl = None
    try:
        with time_limit(CHART_MS):
            chart_since, chart_until = _chart_range(flt, since, until, found)
            if chart_since and chart_until:
                origin = timezone.make_aware(ORIGIN)
                tl = timeline(flt.qs, chart_since, chart_until, origin=origin, server=server)
        if tl is not None:
            found.update(timeline=tl, chart=chart_data(tl, bool(server)), buckets=bucket_rows(tl))
    except TooSlow:
        found["chart_error"] = "The chart would take too long for this filter: narrow the time range."
    if tl is not None and since and until:
        found["count"], found["count_more"] = tl.total, False  # the chart counted exactly this
    else:
        try:
            with time_limit(COUNT_MS):
                found["count"], found["count_more"] = count_upto(flt.qs, COUNT_LIMIT)
        except TooSlow:
            found["count"], found["count_more"] = None, True
    return found


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def event_list(request: HttpRequest) -> HttpResponse:
    """The explorer: one filter form; results, count and timeline in one partial htmx swaps."""
    resolved = _quick_range(request.GET)
    if resolved is not None and not request.htmx:
        return HttpResponseRedirect(f"{request.path}?{resolved.urlencode()}")
    params = resolved or request.GET
    flt = filter_events(params)
    found = _explore(flt, params)
    page = found.get("page")
    audit.record(
        request,
        audit.Action.SEARCH,
        where="explorer",
        filters=audit.filters_of(params),
        shown=len(page.items) if page else 0,  # type: ignore[attr-defined]
        count=found.get("count"),
        count_more=found.get("count_more", False),
        older_page=bool(params.get("cursor")),
    )
    next_query = None
    if page and page.next_cursor:  # type: ignore[attr-defined]
        next_params = params.copy()
        next_params["cursor"] = page.next_cursor  # type: ignore[attr-defined]
        next_query = next_params.urlencode()
    newest = params.copy()
    newest.pop("cursor", None)
    export = newest.copy()
    export.pop("sort", None)
    kept = []
    for name in KEPT_FILTERS:
        value = params.get(name, "").strip()
        if value:
            without = newest.copy()
            without.pop(name)
            kept.append({"name": name, "value": value, "drop_query": without.urlencode()})
    context = {
        **found,
        "filter": flt,
        "params": params,
        "chosen_types": params.getlist("statement_type"),
        "flags": FLAGS,
        "quick_ranges": [(key, label) for key, (label, _) in QUICK_RANGES.items()],
        "zone": timezone.get_current_timezone_name(),
        "zone_links": _zone_links(request, flt, params),
        "next_query": next_query,
        "first_page": not params.get("cursor"),
        "newest_query": newest.urlencode(),
        "export_query": export.urlencode(),
        "has_events": Event.objects.exists(),
        "kept_filters": kept,
        "range_resolved": resolved is not None,
        "count_limit": COUNT_LIMIT,
        "sortable": True,
        "sort": flt.sort_order,
    }
    response = render(request, htmx_template(request, "investigations/event_list.html", "results"), context)
    if resolved is not None:
        response["HX-Push-Url"] = f"{request.path}?{resolved.urlencode()}"
    return response


@require_GET
@role_required(Role.VIEWER)
def event_detail(request: HttpRequest, event_id: int) -> HttpResponse:
    event = _event_for_page(event_id)
    audit.record(request, audit.Action.EVENT_VIEW, event=event.pk, server=event.server)
    return render(request, "investigations/event_detail.html", _event_context(event))


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


def _event_context(event: Event) -> dict[str, object]:
    before, after = session_context(event, SESSION_CONTEXT)
    context: dict[str, object] = {"event": event, "before": before, "after": after}
    context["context_size"] = SESSION_CONTEXT
    context["proof"] = attribution_proof(event)
    context["custody"] = link_of_event(
        event_id=event.pk, source_file_id=event.source_file_id, byte_offset=event.byte_offset
    )
    context["raw_withheld"] = raw_withheld(event)
    # A record of many MiB is shown in part (SHOWN_MAX_BYTES); the page says so and links the whole.
    context["shown_raw"] = shown_part(shown_raw(event))
    context["raw_length"] = len(event.raw)
    context["raw_cut"] = len(event.raw) > settings.SHOWN_MAX_BYTES
    context["shown_sql"] = shown_part(event.sql)
    context["sql_cut"] = len(event.sql) > settings.SHOWN_MAX_BYTES
    context["shown_max"] = settings.SHOWN_MAX_BYTES
    context["time_digits"] = event_time_digits(event)
    return context


def event_time_digits(event: Event) -> int | None:
    """Digits after the second the event's log wrote its time with (investigations.precision):
    every page that shows one event's own time shows it to that precision, not the store's."""
    source = event.source_file.source
    return time_digits(bytes(event.raw[:HEAD]), source.format, source.kind)
