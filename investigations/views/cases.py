"""The case pages: the list, a case with its evidence timeline, notes, saved searches and
reports; the pin popover used by the explorer, the event, session and table pages; report
progress and downloads. Reading needs the investigator role; changing a case needs being one
of its investigators (or an admin), checked once in `_get_case`."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from ingest.models import Event
from investigations import trail
from investigations.cases import (
    AlreadyPinned,
    CaseClosed,
    can_change_case,
    case_create,
    case_set_status,
    cases_to_pin_into,
    evidence_pin,
    evidence_remove,
    note_add,
    pins_of,
    saved_filter_add,
)
from investigations.forms import (
    CaseEditForm,
    CaseForm,
    NoteForm,
    PinForm,
    ReportForm,
    SavedFilterForm,
    SaveSearchForm,
)
from investigations.models import Case, Evidence, Report
from investigations.query.binlog_flashback import case_binlog_rows
from investigations.reports import content
from investigations.reports.generate import report_file, report_request
from investigations.roles import Role, role_required
from investigations.tasks import generate_report

EVIDENCE_PAGE = 100  # pinned events per page of the case's timeline
REPORTS_SHOWN = 20


def _get_case(request: HttpRequest, case_id: int, *, change: bool = False) -> Case:
    """The case, or 404; with change=True, 403 unless the user may change it."""
    case = get_object_or_404(Case.objects.select_related("created_by"), pk=case_id)
    if change and not can_change_case(request.user, case):
        raise PermissionDenied("Only the case's investigators (and admins) may change it.")
    return case


def _queue_report(report_id: int) -> None:
    generate_report.delay(report_id)


@require_GET
@role_required(Role.INVESTIGATOR)
def case_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", Case.Status.OPEN)
    cases = Case.objects.prefetch_related("investigators").order_by("-updated_at", "-pk")
    if status in Case.Status.values:
        cases = cases.filter(status=status)
    if request.GET.get("mine"):
        cases = cases.filter(investigators=request.user)
    cases = cases.annotate(evidence_count=Count("evidence", distinct=True))
    return render(
        request,
        "investigations/case_list.html",
        {"cases": cases[:500], "status": status, "mine": bool(request.GET.get("mine"))},
    )


@require_http_methods(["GET", "POST"])
@role_required(Role.INVESTIGATOR)
def case_new(request: HttpRequest) -> HttpResponse:
    form = CaseForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        case = case_create(user=request.user, **form.cleaned_data)
        trail.record(request, trail.Action.CASE_CREATE, case=case.pk, title=case.title)
        return HttpResponseRedirect(reverse("case-detail", args=[case.pk]))
    return render(request, "investigations/case_form.html", {"form": form})


@require_GET
@role_required(Role.INVESTIGATOR)
@vary_on_headers("HX-Request")
def case_detail(request: HttpRequest, case_id: int) -> HttpResponse:
    case = _get_case(request, case_id)
    reports = list(case.reports.select_related("generated_by")[:REPORTS_SHOWN])
    context = {
        "case": case,
        "reports": reports,
        "reports_running": any(r.status in (Report.Status.QUEUED, Report.Status.RUNNING) for r in reports),
        "can_change": can_change_case(request.user, case),
    }
    if request.htmx and request.GET.get("part") == "reports":
        return render(request, "investigations/case_detail.html#reports", context)
    paginator = Paginator(content.evidence_pins(case), EVIDENCE_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    events = Event.objects.select_related("source_file", "session").filter(
        id__in=[pin.event_id for pin in page.object_list]
    )
    by_id = {e.id: e for e in events}
    first = (page.number - 1) * EVIDENCE_PAGE
    items = [content.Item(first + n + 1, pin, by_id.get(pin.event_id)) for n, pin in enumerate(page)]
    context.update(
        page=page,
        items=items,
        window=content.case_window(case),
        notes=content.notes(case),
        filters=content.saved_filters(case),
        investigators=case.investigators.order_by("username"),
        note_form=NoteForm(),
        filter_form=SavedFilterForm(),
        report_formats=Report.Format.choices,
        destructive=Evidence.objects.filter(case=case, event__destructive=True).count(),
        binlog_rows=case_binlog_rows(case.pk),
    )
    return render(request, "investigations/case_detail.html", context)


@require_http_methods(["GET", "POST"])
@role_required(Role.INVESTIGATOR)
def case_edit(request: HttpRequest, case_id: int) -> HttpResponse:
    case = _get_case(request, case_id, change=True)
    form = CaseEditForm(request.POST or None, instance=case)
    if request.method == "POST" and form.is_valid():
        form.save()
        trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="edit", changed=form.changed_data)
        return HttpResponseRedirect(reverse("case-detail", args=[case.pk]))
    return render(request, "investigations/case_form.html", {"form": form, "case": case})


@require_POST
@role_required(Role.INVESTIGATOR)
def case_status(request: HttpRequest, case_id: int) -> HttpResponse:
    """Close or reopen a case (a closed case takes no pins or notes)."""
    case = _get_case(request, case_id, change=True)
    status = request.POST.get("status")
    if status not in Case.Status.values:
        return HttpResponse("status must be open or closed", status=400)
    case_set_status(case=case, status=status)
    trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what=status)
    return HttpResponseRedirect(reverse("case-detail", args=[case.pk]))


@require_POST
@role_required(Role.INVESTIGATOR)
def case_note(request: HttpRequest, case_id: int) -> HttpResponse:
    case = _get_case(request, case_id, change=True)
    form = NoteForm(request.POST)
    if not form.is_valid():
        return HttpResponse("A note needs text.", status=400)
    try:
        note = note_add(case=case, user=request.user, text=form.cleaned_data["text"])
    except CaseClosed:
        return HttpResponse("The case is closed: reopen it to write notes.", status=409)
    trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="note", note=note.pk)
    return HttpResponseRedirect(reverse("case-detail", args=[case.pk]) + "#notes")


@require_POST
@role_required(Role.INVESTIGATOR)
def case_filter(request: HttpRequest, case_id: int) -> HttpResponse:
    """Keep an explorer search with the case."""
    case = _get_case(request, case_id, change=True)
    form = SavedFilterForm(request.POST)
    if not form.is_valid():
        return HttpResponse("A saved search needs a name and the explorer's query.", status=400)
    saved = saved_filter_add(case=case, user=request.user, **form.cleaned_data)
    trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="saved search", query=saved.query)
    return HttpResponseRedirect(reverse("case-detail", args=[case.pk]) + "#filters")


@require_POST
@role_required(Role.INVESTIGATOR)
def case_filter_remove(request: HttpRequest, case_id: int, filter_id: int) -> HttpResponse:
    case = _get_case(request, case_id, change=True)
    case.saved_filters.filter(pk=filter_id).delete()  # already gone: nothing to do, as asked
    trail.record(
        request, trail.Action.CASE_CHANGE, case=case.pk, what="saved search removed", search=filter_id
    )
    return HttpResponseRedirect(reverse("case-detail", args=[case.pk]) + "#filters")


@require_POST
@role_required(Role.INVESTIGATOR)
def case_unpin(request: HttpRequest, case_id: int, event_id: int) -> HttpResponse:
    case = _get_case(request, case_id, change=True)
    try:
        evidence_remove(case=case, event_id=event_id)  # already gone: nothing to do, as asked
    except CaseClosed:
        return HttpResponse("The case is closed: reopen it to change its evidence.", status=409)
    trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="unpin", event=event_id)
    return HttpResponseRedirect(reverse("case-detail", args=[case.pk]) + "#evidence")


@require_http_methods(["GET", "POST"])
@role_required(Role.INVESTIGATOR)
def pin(request: HttpRequest) -> HttpResponse:
    """Pin an event: a small form (the popover beside an event, or a page without JavaScript)
    with the user's most recent open case chosen, a note, and "new case"."""
    cases = cases_to_pin_into(request.user)
    form = PinForm(request.POST or None, cases=cases, initial={"event": request.GET.get("event")})
    template = "investigations/pin.html" + ("#pin-form" if request.htmx else "")
    event = None
    if form.is_bound and form.is_valid():
        event = Event.objects.filter(pk=form.cleaned_data["event"]).first()
        if event is None:
            form.add_error(None, "No such event.")
    elif not form.is_bound:
        event_id = _int(request.GET.get("event"))
        if event_id is None:
            return HttpResponse("Which event? Ask for /cases/pin/?event=ID.", status=400)
        event = Event.objects.filter(pk=event_id).first()
        if event is None:
            raise Http404("No such event.")
    if form.is_bound and form.is_valid() and event is not None:
        case = form.chosen_case()
        note = form.cleaned_data["note"]
        try:
            with transaction.atomic():
                made = case is None
                if case is None:
                    case = case_create(user=request.user, title=form.cleaned_data["title"].strip())
                    trail.record(request, trail.Action.CASE_CREATE, case=case.pk, title=case.title)
                pinned = evidence_pin(case=case, event=event, user=request.user, note=note)
                trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="pin", event=event.pk)
        except AlreadyPinned:
            form.add_error("case", "This event is already pinned to that case.")
        except CaseClosed:
            form.add_error("case", "That case is closed.")
        else:
            if not request.htmx:
                return HttpResponseRedirect(reverse("case-detail", args=[case.pk]) + "#evidence")
            context = {"case": case, "pin": pinned, "event": event, "pinned": pins_of([event.pk])}
            if made:  # the page's "pin selected" bar offers it next (static/js/pins.js)
                fresh = PinForm(cases=cases_to_pin_into(request.user))
                context.update(case_choices=fresh.fields["case"].choices, chosen=str(case.pk))
            return render(request, "investigations/pin.html#pinned", context)
    # htmx swaps only 2xx answers: the popover's form comes back with its errors as 200.
    status = 400 if form.errors and not request.htmx else 200
    return render(request, template, {"form": form, "event": event}, status=status)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@require_POST
@role_required(Role.INVESTIGATOR)
def case_report(request: HttpRequest, case_id: int) -> HttpResponse:
    """Ask for a report: queued for a worker, whose progress the case page shows (htmx polls
    it; a reload shows it too), then its download link."""
    case = _get_case(request, case_id, change=True)
    form = ReportForm(request.POST)
    if not form.is_valid():
        return HttpResponse("format must be pdf, csv or json", status=400)
    report = report_request(
        case=case, fmt=form.cleaned_data["format"], user=request.user, queue=_queue_report
    )
    trail.record(request, trail.Action.REPORT_CREATE, case=case.pk, report=report.pk, format=report.format,
                 status=report.status, sha256=report.sha256)  # fmt: skip
    return HttpResponseRedirect(reverse("case-detail", args=[case.pk]) + "#reports")


@require_GET
@role_required(Role.INVESTIGATOR)
def report_download(request: HttpRequest, report_id: int) -> HttpResponse:
    """The report file, as an attachment, once complete (never from a public URL)."""
    return report_file(request, report_id)


@require_http_methods(["GET", "POST"])
@role_required(Role.INVESTIGATOR)
def save_search(request: HttpRequest) -> HttpResponse:
    """Keep the explorer's current search with a case (the explorer links here with its query)."""
    cases = cases_to_pin_into(request.user)
    form = SaveSearchForm(request.POST or None, cases=cases, initial={"query": request.GET.get("query", "")})
    if request.method == "POST" and form.is_valid():
        case = form.chosen_case()
        saved = saved_filter_add(
            case=case, user=request.user, name=form.cleaned_data["name"], query=form.cleaned_data["query"]
        )
        trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="saved search", query=saved.query)
        return HttpResponseRedirect(reverse("case-detail", args=[case.pk]) + "#filters")
    return render(request, "investigations/save_search.html", {"form": form})
