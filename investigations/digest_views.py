"""The digest page: the explorer's filter, its statements grouped by fingerprint."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from investigations import audit
from investigations.digest import DEFAULT_SORT, SORTS, digest, without_sort
from investigations.query import FLAGS, TooSlow, filter_events, time_limit
from investigations.roles import Role, role_required
from investigations.views import QUICK_RANGES, _quick_range, htmx_template

DIGEST_ROWS = 100  # fingerprints a page shows; the rest are counted
DIGEST_MS = 10_000  # PostgreSQL stops the digest's queries after this long
SORT_LABELS = {"count": "count", "first": "first seen", "last": "last seen", "destructive": "destructive"}
KEPT = ("connection_id", "session", "fingerprint")  # filters without a field here: kept as chips


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def digest_page(request: HttpRequest) -> HttpResponse:
    """One row per fingerprint of the filter's statements; a fingerprint links to its events."""
    resolved = _quick_range(request.GET)
    if resolved is not None and not request.htmx:
        return HttpResponseRedirect(f"{request.path}?{resolved.urlencode()}")
    params = resolved or request.GET
    sort = params.get("sort") if params.get("sort") in SORTS else DEFAULT_SORT
    flt = filter_events(without_sort(params))  # `sort` here orders the digest, not the events
    context: dict[str, object] = {}
    if flt.is_valid():
        try:
            with time_limit(DIGEST_MS):
                context["digest"] = digest(flt.qs, sort=sort, limit=DIGEST_ROWS)
        except TooSlow:
            context["error"] = "This digest took too long. Narrow the time range, or add a table or a user."
    found = context.get("digest")
    audit.record(
        request,
        audit.Action.SEARCH,
        where="digest",
        filters=audit.filters_of(params),
        shown=len(found.rows) if found else 0,  # type: ignore[attr-defined]
    )
    events_query = params.copy()
    events_query.pop("sort", None)
    kept = []
    for name in KEPT:
        value = params.get(name, "").strip()
        if value:
            without = params.copy()
            without.pop(name)
            kept.append({"name": name, "value": value, "drop_query": without.urlencode()})
    context.update(
        filter=flt,
        params=params,
        sort=sort,
        sorts=SORT_LABELS,
        chosen_types=params.getlist("statement_type"),
        flags=FLAGS,
        quick_ranges=[(key, label) for key, (label, _) in QUICK_RANGES.items()],
        zone=timezone.get_current_timezone_name(),
        events_query=events_query.urlencode(),
        kept_filters=kept,
        row_limit=DIGEST_ROWS,
    )
    response = render(request, htmx_template(request, "investigations/digest.html", "results"), context)
    if resolved is not None:
        response["HX-Push-Url"] = f"{request.path}?{resolved.urlencode()}"
    return response
