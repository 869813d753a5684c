"""The audit trail's pages, for admins: the records newest first, filtered by user, action and
time, and the same selection as CSV."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import UTC
from typing import Any

from django import forms
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from investigations import trail
from investigations.roles import Role, role_required
from investigations.trail import Action, AuditRecord

PAGE_SIZE = 100
EXPORT_CHUNK = 2000
CSV_COLUMNS = ("id", "at", "username", "user_id", "action", "ip", "method", "path", "token", "details")
# A spreadsheet runs a cell that begins with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


class AuditFilter(forms.Form):
    user = forms.CharField(required=False, max_length=150, help_text="The exact user name")
    action = forms.ChoiceField(required=False, choices=[("", "any"), *Action.choices])
    since = forms.DateTimeField(
        required=False, label="From", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    until = forms.DateTimeField(
        required=False, label="Until", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    before = forms.IntegerField(required=False, widget=forms.HiddenInput, min_value=1)

    def records(self) -> QuerySet[AuditRecord]:
        """The filtered records, newest first (by id: the order they were written)."""
        records = AuditRecord.objects.order_by("-id")
        data = self.cleaned_data
        if data.get("user"):
            records = records.filter(username=data["user"])
        if data.get("action"):
            records = records.filter(action=data["action"])
        if data.get("since"):
            records = records.filter(at__gte=data["since"])
        if data.get("until"):
            records = records.filter(at__lt=data["until"])
        return records


def csv_cell(value: Any) -> str:
    """A cell a spreadsheet shows as text: one that could start a formula gets a leading quote."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class _Echo:
    def write(self, value: str) -> str:
        return value


@require_GET
@role_required(Role.ADMIN)
def audit_list(request: HttpRequest) -> HttpResponse:
    form = AuditFilter(request.GET or None)
    records: list[AuditRecord] = []
    next_query = None
    if form.is_bound and not form.is_valid():
        return render(request, "investigations/audit_list.html", {"form": form, "records": []}, status=400)
    if not form.is_bound:
        form = AuditFilter({})
        form.is_valid()
    selected = form.records()
    if form.cleaned_data.get("before"):
        selected = selected.filter(id__lt=form.cleaned_data["before"])
    records = list(selected[: PAGE_SIZE + 1])
    if len(records) > PAGE_SIZE:
        records = records[:PAGE_SIZE]
        params = request.GET.copy()
        params["before"] = str(records[-1].pk)
        next_query = params.urlencode()
    export = request.GET.copy()
    export.pop("before", None)
    context = {
        "form": form,
        "records": records,
        "next_query": next_query,
        "export_query": export.urlencode(),
        "first_page": not form.cleaned_data.get("before"),
    }
    return render(request, "investigations/audit_list.html", context)


@require_GET
@role_required(Role.ADMIN)
def audit_export(request: HttpRequest) -> HttpResponse:
    """Every record of the filter (not only one page), oldest first, as CSV; streamed."""
    form = AuditFilter(request.GET)
    if not form.is_valid():
        return HttpResponse(json.dumps(form.errors), status=400, content_type="application/json")
    filters = trail.filters_of(request.GET)
    trail.record(request, Action.AUDIT_EXPORT, filters=filters)
    records = form.records().order_by("id")

    def rows() -> Iterator[str]:
        writer = csv.writer(_Echo())
        yield writer.writerow(CSV_COLUMNS)
        for r in records.iterator(chunk_size=EXPORT_CHUNK):
            details = json.dumps(r.details, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True)
            at = r.at.astimezone(UTC).isoformat()
            cells = (r.pk, at, r.username, r.user_id, r.action, r.ip, r.method, r.path, r.token, details)
            yield writer.writerow([csv_cell(c) for c in cells])

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="auditweb-audit-trail-{stamp}.csv"'
    return response
