"""Flashback SQL for a whole case and for a time range on one table (text/plain, never executed).

Beside the per-event one (api/event_rows.py). A SIEM token reaches neither: they are not in
investigations.roles.SIEM_VIEWS."""

from __future__ import annotations

from django import forms
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request

from investigations import trail
from investigations.api.cases import CASE_ID, case_for
from investigations.api.event_rows import Gone, sql_download
from investigations.models import Evidence
from investigations.query.binlog import RowsUnavailable
from investigations.query.binlog_flashback import TooManyRows, case_flashback, table_range_flashback
from investigations.query.binlog_state import servers_of
from investigations.query.fields import UtcDateTimeField
from investigations.roles import Role, role_permission

WARNING = (
    "Text for a person to check and run, in one transaction: a DELETE becomes INSERTs of the before "
    "images, an UPDATE sets the before images back by primary key, an INSERT is deleted; newest "
    "statement and row first. Rows changed again later are overwritten by it: check them first. "
)


class TooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "More rows than one flashback script undoes."


@extend_schema(
    parameters=[CASE_ID],
    responses={
        (200, "text/plain"): OpenApiTypes.STR,
        404: OpenApiTypes.OBJECT,
        410: OpenApiTypes.OBJECT,
        413: OpenApiTypes.OBJECT,
    },
    summary="SQL that undoes the row changes of a case's pinned events (never executed by AuditWeb)",
    operation_id="cases_flashback",
    description=WARNING
    + "The rows linked for sure to the case's pinned events; events whose rows are only possibly "
    "theirs (ambiguous) are named in a comment and left out. 413 beyond 100,000 rows.",
)
@api_view(["GET"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def case_flashback_sql(request: Request, case_id: int) -> HttpResponse:
    case = case_for(request, case_id)
    events = list(Evidence.objects.filter(case=case).values_list("event_id", flat=True))
    trail.record(request, trail.Action.EXPORT, case=case.pk, what="case flashback")
    try:
        sql = case_flashback(case.pk, events)
    except TooManyRows as e:
        raise TooLarge(str(e)) from None
    except RowsUnavailable as e:
        raise Gone(str(e)) from None
    return sql_download(sql, f"auditweb-flashback-case-{case.pk}.sql")


class RangeForm(forms.Form):
    server = forms.CharField(required=False, max_length=200)
    since = UtcDateTimeField()
    until = UtcDateTimeField()


@extend_schema(
    parameters=[
        OpenApiParameter(
            "name",
            str,
            OpenApiParameter.PATH,
            description="`db.table`, URL-encoded",
            examples=[OpenApiExample("a table", "shop.orders")],
        ),
        OpenApiParameter(
            "since",
            OpenApiTypes.DATETIME,
            required=True,
            description="ISO 8601, inclusive (a commit time)",
            examples=[OpenApiExample("a moment", "2026-11-25T01:22:03Z")],
        ),
        OpenApiParameter(
            "until",
            OpenApiTypes.DATETIME,
            required=True,
            description="ISO 8601, inclusive",
            examples=[OpenApiExample("a minute later", "2026-11-25T01:23:03Z")],
        ),
        OpenApiParameter(
            "server",
            str,
            description="Server label; needed only when several servers' binlogs have the table",
            examples=[OpenApiExample("a server", "db1")],
        ),
    ],
    responses={
        (200, "text/plain"): OpenApiTypes.STR,
        400: OpenApiTypes.OBJECT,
        410: OpenApiTypes.OBJECT,
        413: OpenApiTypes.OBJECT,
    },
    summary="SQL that undoes every binlog row change to a table in a time range (never executed)",
    operation_id="tables_flashback",
    description=WARNING
    + "Every row change the binary logs hold for the table with a commit time in [since, until], "
    "whether the join tied it to a logged statement or not; only that table's rows. 413 beyond "
    "100,000 rows.",
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def table_flashback_sql(request: Request, name: str) -> HttpResponse:
    form = RangeForm(request.query_params)
    if not form.is_valid():
        raise ValidationError(form.errors)
    since, until = form.cleaned_data["since"], form.cleaned_data["until"]
    if until < since:
        raise ValidationError({"until": "until comes before since."})
    server = form.cleaned_data["server"]
    if not server:
        servers = servers_of(name)
        if len(servers) > 1:
            raise ValidationError({"server": f"Several servers' binlogs have {name}: name one of {servers}."})
        server = servers[0] if servers else ""
    trail.record(request, trail.Action.EXPORT, table=name, server=server, what="table flashback")
    try:
        sql = table_range_flashback(server, name, since, until)
    except TooManyRows as e:
        raise TooLarge(str(e)) from None
    except RowsUnavailable as e:
        raise Gone(str(e)) from None
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)[:100]
    return sql_download(sql, f"auditweb-flashback-{safe}.sql")
