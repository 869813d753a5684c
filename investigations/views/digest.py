"""The digest page: the explorer's filter, its statements grouped by fingerprint."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from investigations import trail
from investigations.query.digest import DEFAULT_SORT, DIGEST_MS, SORTS, Digest, digest, without_sort
from investigations.query.filters import FLAGS, filter_events
from investigations.query.limits import TooSlow, time_limit
from investigations.roles import Role, role_required
from investigations.views.shared import QuickRange, htmx_template, kept_filters, quick_range_choices

DIGEST_ROWS = 100  # fingerprints a page shows; the rest are counted
SORT_LABELS = {"count": "count", "first": "first seen", "last": "last seen", "destructive": "destructive"}
KEPT = ("connection_id", "session", "fingerprint")  # filters without a field here: kept as chips


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def digest_page(request: HttpRequest) -> HttpResponse:
    """One row per fingerprint of the filter's statements; a fingerprint links to its events."""
    picked = QuickRange.of(request)
    if picked.redirect is not None:
        return picked.redirect
    params = picked.params
    sort = params.get("sort") if params.get("sort") in SORTS else DEFAULT_SORT
    flt = filter_events(without_sort(params))  # `sort` here orders the digest, not the events
    found: Digest | None = None
    error = None
    if flt.is_valid():
        try:
            with time_limit(DIGEST_MS):
                found = digest(flt.qs, sort=sort, limit=DIGEST_ROWS)
        except TooSlow:
            error = "This digest took too long. Narrow the time range, or add a table or a user."
    trail.record(
        request,
        trail.Action.SEARCH,
        where="digest",
        filters=trail.filters_of(params),
        shown=len(found.rows) if found else 0,
    )
    events_query = params.copy()
    events_query.pop("sort", None)
    context: dict[str, object] = {"digest": found} if found is not None else {}
    if error is not None:
        context["error"] = error
    context.update(
        filter=flt,
        params=params,
        sort=sort,
        sorts=SORT_LABELS,
        chosen_types=params.getlist("statement_type"),
        flags=FLAGS,
        quick_ranges=quick_range_choices(),
        zone=timezone.get_current_timezone_name(),
        events_query=events_query.urlencode(),
        kept_filters=kept_filters(params, KEPT),
        row_limit=DIGEST_ROWS,
    )
    return picked.push(
        render(request, htmx_template(request, "investigations/digest.html", "results"), context)
    )
