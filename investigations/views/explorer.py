"""The explorer: one filter form; a page of events, their count and their timeline in one partial."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ingest.models import Event
from investigations import trail
from investigations.middleware import TZ_COOKIE, zone_named
from investigations.query.blast import mark_rows
from investigations.query.filters import FLAGS, EventFilter, filter_events
from investigations.query.limits import TooSlow, count_upto, time_limit
from investigations.query.pages import BadCursor, Page, sorted_page
from investigations.query.timeline import time_bounds, timeline
from investigations.roles import Role, role_required
from investigations.views.charts import bucket_rows, chart_data
from investigations.views.shared import QuickRange, htmx_template, kept_filters, quick_range_choices

PAGE_SIZE = 50
COUNT_LIMIT = 10_000  # beyond this the explorer says "more than 10,000"
PAGE_MS, COUNT_MS, CHART_MS = 15_000, 2_000, 5_000  # PostgreSQL stops a query after this long
CHART_DEFAULT_SPAN = timedelta(days=1)  # charted before the newest event when the filter has no From
KEPT_FILTERS = ("session", "fingerprint")  # set by links, no field in the form: kept as hidden inputs
ORIGIN = datetime(1970, 1, 5)  # a Monday: chart buckets of days and weeks start at the viewer's midnight


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


def _sort_window(request: HttpRequest, picked: QuickRange) -> QuickRange:
    """A column's order with no From is asked for the chart's default span: the events of the day
    before the newest matching one (`CHART_DEFAULT_SPAN`), that day's From put in the URL as a
    quick pick's is (a redirect, or an htmx push).

    Sorting by a column other than time reads every matching event (no index serves those
    orders: each would tax ingestion), so the whole of a big store would take seconds (10
    million events: 8 s under load, docs/benchmarks.md); the chart's day well under one. An earlier
    From sorts more, and says so in the URL. Not applied to a next page (its cursor belongs to
    the range of the first), nor when no event matches before that day anyway."""
    params = picked.params
    if params.get("cursor") or params.get("since"):
        return picked
    flt = filter_events(params)
    if not flt.is_valid() or flt.sort_order.lstrip("-") == "time":  # (the form sends `sort=` for -time)
        return picked
    try:
        with time_limit(CHART_MS):
            first, last = time_bounds(flt.qs)
    except TooSlow:
        return picked  # the page itself is bounded by PAGE_MS
    if first is None or last is None:
        return picked
    until = flt.form.cleaned_data.get("until")
    end = min(until, last + timedelta(microseconds=1)) if until else last + timedelta(microseconds=1)
    since = (end - CHART_DEFAULT_SPAN).replace(microsecond=0)
    if since <= first:
        return picked  # every matching event is in that day: nothing to leave out
    windowed = params.copy()
    windowed["since"] = timezone.localtime(since).strftime("%Y-%m-%dT%H:%M:%S")
    windowed["tz"] = timezone.get_current_timezone_name()
    url = f"{request.path}?{windowed.urlencode()}"
    return QuickRange(windowed, url, None if request.htmx else HttpResponseRedirect(url))


def _explore(flt: EventFilter, params: QueryDict) -> dict[str, object]:
    """What the results partial shows: a page of events, the count, the timeline (or why not)."""
    found: dict[str, object] = {}
    if not flt.is_valid():
        return found
    events = flt.qs.select_related("session").defer("raw_inline", "fingerprint")
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
    mark_rows(found["page"].items)
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
    picked = _sort_window(request, QuickRange.of(request))
    if picked.redirect is not None:
        return picked.redirect
    params = picked.params
    flt = filter_events(params)
    found = _explore(flt, params)
    page = found.get("page")
    page = page if isinstance(page, Page) else None
    trail.record(
        request,
        trail.Action.SEARCH,
        where="explorer",
        filters=trail.filters_of(params),
        shown=len(page.items) if page else 0,
        count=found.get("count"),
        count_more=found.get("count_more", False),
        older_page=bool(params.get("cursor")),
    )
    next_query = None
    if page and page.next_cursor:
        next_params = params.copy()
        next_params["cursor"] = page.next_cursor
        next_query = next_params.urlencode()
    newest = params.copy()
    newest.pop("cursor", None)
    export = newest.copy()
    export.pop("sort", None)
    context = {
        **found,
        "filter": flt,
        "params": params,
        "chosen_types": params.getlist("statement_type"),
        "flags": FLAGS,
        "quick_ranges": quick_range_choices(),
        "zone": timezone.get_current_timezone_name(),
        "zone_links": _zone_links(request, flt, params),
        "next_query": next_query,
        "first_page": not params.get("cursor"),
        "newest_query": newest.urlencode(),
        "export_query": export.urlencode(),
        "has_events": Event.objects.exists(),
        "kept_filters": kept_filters(newest, KEPT_FILTERS),
        "range_resolved": picked.url is not None,
        "count_limit": COUNT_LIMIT,
        "sortable": True,
        "rows_column": True,
        "sort": flt.sort_order,
        "column_sort": flt.sort_order.lstrip("-") != "time",
    }
    return picked.push(
        render(request, htmx_template(request, "investigations/event_list.html", "results"), context)
    )
