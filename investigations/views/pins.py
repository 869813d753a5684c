"""Pinning several events at once: the ticked rows of the explorer, a session or a table's history
("pin 12 selected to case ..."), and a new case made from the explorer's search with every event
it matches (counted first, refused over CASE_FROM_SEARCH_MAX)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from investigations import trail
from investigations.bulk_pins import case_from_search, record_pins, search_pins_write
from investigations.cases import CaseClosed, case_create, cases_to_pin_into, evidence_pin_many, pins_of
from investigations.forms import BulkPinForm, SearchCaseForm
from investigations.query.filters import filter_events
from investigations.query.limits import TooSlow, count_upto, time_limit
from investigations.roles import Role, role_required
from investigations.tasks import pin_search_events

logger = logging.getLogger(__name__)

SEARCH_MS = 15_000  # PostgreSQL stops counting (or listing) a search's events after this long
NOT_FILTERS = ("cursor", "csrfmiddlewaretoken")


def _back(request: HttpRequest, next_url: str) -> str:
    """The page the pin came from (only a path of this site), else the explorer."""
    if next_url.startswith("/") and url_has_allowed_host_and_scheme(next_url, allowed_hosts=None):
        return next_url
    return reverse("events")


@require_POST
@role_required(Role.INVESTIGATOR)
def pin_selected(request: HttpRequest) -> HttpResponse:
    """Pin the ticked events into one case (or a new one) in one transaction; htmx gets the
    outcome and each event's new pinned marks, a browser without JavaScript goes back."""
    form = BulkPinForm(request.POST, cases=cases_to_pin_into(request.user))
    context: dict[str, object] = {"back": _back(request, request.POST.get("next", ""))}
    if form.is_valid():
        case = form.chosen_case()
        ids = form.cleaned_data["event"]
        try:
            with transaction.atomic():
                if case is None:
                    case = case_create(user=request.user, title=form.cleaned_data["title"].strip())
                    trail.record(request, trail.Action.CASE_CREATE, case=case.pk, title=case.title)
                    # the bar's list of cases then offers it (and chooses it) for the next pins
                    fresh = BulkPinForm(cases=cases_to_pin_into(request.user))
                    context.update(case_choices=fresh.fields["case"].choices, chosen=str(case.pk))
                result = evidence_pin_many(case=case, event_ids=ids, user=request.user,
                                           note=form.cleaned_data["note"])  # fmt: skip
                record_pins(request, case, result, via="selection")
        except CaseClosed:
            form.add_error("case", "That case is closed.")
        else:
            context.update(case=case, result=result, ids=ids, pinned=pins_of(ids))
            if not request.htmx:
                text = f"Pinned {len(result.pinned)} event(s) to case #{case.pk} {case.title}"
                if result.already:
                    text += f"; {len(result.already)} were in it already"
                messages.success(request, text + ".")
                return HttpResponseRedirect(str(context["back"]))
            return render(request, "investigations/_pin_selected_result.html", context)
    context["errors"] = [e for errs in form.errors.values() for e in errs]
    if request.htmx:  # htmx swaps only 2xx answers
        return render(request, "investigations/_pin_selected_result.html", context)
    return render(request, "investigations/pin_selected.html", context, status=400)


def _queue_search_pins(case_id: int, event_ids: list[int], user_id: int) -> None:
    """For a worker; without a broker the request pins them itself (bounded by CASE_FROM_SEARCH_MAX)
    rather than leave a case that says it came from a search but holds none of it."""
    try:
        pin_search_events.delay(case_id, event_ids, user_id)
    except Exception:  # the broker is down
        logger.warning(
            "could not queue the pins of case %s: pinning them in the request", case_id, exc_info=True
        )
        search_pins_write(case_id, event_ids, user_id)


def _search_query(params: QueryDict) -> str:
    query = params.copy()
    for name in NOT_FILTERS:
        query.pop(name, None)
    return query.urlencode()


@require_http_methods(["GET", "POST"])
@role_required(Role.INVESTIGATOR)
def case_from_search_view(request: HttpRequest) -> HttpResponse:
    """GET: how many events the explorer's search (this page's query string) matches, and a form
    for the case; POST: make it and pin them, or refuse (over the limit, nothing, too slow)."""
    limit = settings.CASE_FROM_SEARCH_MAX
    flt = filter_events(request.GET)
    query = _search_query(request.GET)
    filters = trail.filters_of(request.GET)
    filters.pop("tz", None)
    shown = [(k, ", ".join(v) if isinstance(v, list) else str(v)) for k, v in filters.items()]
    described = "; ".join(f"{k}={v}" for k, v in shown)
    form = SearchCaseForm(
        request.POST or None, initial={"title": f"Search: {described or 'every event'}"[:200]}
    )
    context: dict[str, object] = {"form": form, "filter": flt, "query": query, "filters": shown}
    context.update(limit=limit, in_request=settings.CASE_FROM_SEARCH_IN_REQUEST)
    if not flt.is_valid():
        return render(request, "investigations/case_from_search.html", context, status=400)
    events = flt.qs.order_by("occurred_at", "id")
    try:
        with time_limit(SEARCH_MS):
            if request.method == "POST":
                ids = list(events.values_list("pk", flat=True)[: limit + 1])
                count, more = min(len(ids), limit), len(ids) > limit
            else:
                count, more = count_upto(events, limit)
    except TooSlow:
        context["error"] = (
            "Counting this search took too long. Narrow the time range, or add a table or a user."
        )
        return render(request, "investigations/case_from_search.html", context, status=400)
    context.update(count=count, more=more)
    if request.method == "GET":
        trail.record(request, trail.Action.SEARCH, where="new case from a search", filters=filters,
                     count=count, count_more=more)  # fmt: skip
    if request.method == "POST" and form.is_valid() and count and not more:
        case, result = case_from_search(
            who=request,
            title=form.cleaned_data["title"].strip(),
            description=form.cleaned_data["description"],
            query=query,
            event_ids=ids,
            in_request=settings.CASE_FROM_SEARCH_IN_REQUEST,
            queue=_queue_search_pins,
        )
        if result is None:
            messages.info(
                request, f"{count:,} events are being pinned by a worker; a note in the case says when."
            )
        else:
            messages.success(request, f"Pinned the {len(result.pinned):,} events of the search.")
        return HttpResponseRedirect(reverse("case-detail", args=[case.pk]))
    status = 400 if request.method == "POST" else 200
    return render(request, "investigations/case_from_search.html", context, status=status)
