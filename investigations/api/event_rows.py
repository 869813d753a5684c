"""An event's rows from the binary log (paged, with the join's evidence) and its flashback SQL."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.models import BinlogStatement, Event
from investigations import trail
from investigations.api.events import UtcDateTimeField
from investigations.api.sessions import ID_EXAMPLE
from investigations.query.binlog import (
    DEFAULT_PAGE,
    MAX_PAGE,
    RowsUnavailable,
    confidence_of,
    event_flashback,
    rows_changed_of,
    rows_page,
    statements_of,
)
from investigations.roles import Role, role_permission

_UTC = UtcDateTimeField()
CONFIDENCES = ["thread_id", "unique_text_and_time", "ordered_assignment", "ambiguous", "unlinked"]


class Gone(APIException):
    status_code = status.HTTP_410_GONE
    default_detail = "The binary log these rows are in cannot be read any more."


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The rows are only possibly this event's: no flashback is written."


class RowSerializer(serializers.Serializer):
    table = serializers.CharField(help_text="db.tbl")
    change = serializers.ChoiceField(choices=["delete", "update", "insert"])
    before = serializers.DictField(
        allow_null=True,
        help_text="Every column by name before the change (null for an insert). Integers are numbers, "
        'DECIMAL a string, DATETIME `YYYY-MM-DD HH:MM:SS[.ffffff]`, binary `{"base64": ...}`',
    )
    after = serializers.DictField(
        allow_null=True, help_text="Every column after the change (null for a delete)"
    )
    note = serializers.CharField(
        required=False,
        help_text="Only where an image lacks a column the binlog holds something of: why (a partial "
        "JSON update whose diff cannot be applied, e.g. under binlog_row_image=MINIMAL) and the diff",
    )


class RowStatementSerializer(serializers.Serializer):
    binlog_file = serializers.CharField(help_text="The binlog file's name")
    position = serializers.IntegerField(help_text="Byte position of its transaction in that file")
    gtid = serializers.CharField(allow_null=True)
    thread_id = serializers.IntegerField(allow_null=True, help_text="Where the binlog names the connection")
    committed_at = serializers.CharField(help_text="UTC, to the second (server clock)")
    text = serializers.CharField(help_text="The statement text the binlog holds (annotate rows), if any")
    rows = serializers.IntegerField()
    confidence = serializers.ChoiceField(choices=CONFIDENCES)
    evidence = serializers.ListField(child=serializers.CharField())
    candidates = serializers.ListField(
        child=serializers.IntegerField(), help_text="Events that may have made it (ambiguous, or CALLs)"
    )


class EventRowsSerializer(serializers.Serializer):
    event = serializers.IntegerField()
    rows_changed = serializers.IntegerField(allow_null=True, help_text="As in /api/v1/events/")
    confidence = serializers.ChoiceField(
        choices=CONFIDENCES,
        allow_null=True,
        help_text="The link's (the weakest, over several); null: no rows",
    )
    evidence = serializers.ListField(
        child=serializers.CharField(), help_text="Why these rows are the event's"
    )
    statements = RowStatementSerializer(many=True, help_text="The binlog row statements the rows come from")
    count = serializers.IntegerField(help_text="Rows in all pages")
    next = serializers.URLField(allow_null=True, help_text="The following page, or null at the end")
    rows = RowSerializer(many=True)


def _statement(s: BinlogStatement) -> dict:
    t = s.transaction
    return {
        "binlog_file": t.file_name,
        "position": t.start,
        "gtid": t.gtid,
        "thread_id": s.thread_id,
        "committed_at": _UTC.to_representation(t.commit_time),
        "text": s.text,
        "rows": s.rows,
        "confidence": s.confidence,
        "evidence": s.evidence,
        "candidates": s.candidates,
    }


def _page(request: Request) -> tuple[int, int]:
    try:
        size = int(request.query_params.get("page_size", DEFAULT_PAGE))
        offset = int(request.query_params.get("offset", 0))
    except ValueError:
        raise ValidationError({"page_size": "Whole numbers (page_size, offset)."}) from None
    return max(0, offset), max(1, min(size, MAX_PAGE))


EVENT_ID = OpenApiParameter(
    "event_id", int, OpenApiParameter.PATH, description="The event's `id`", examples=[ID_EXAMPLE]
)


@extend_schema(
    parameters=[
        EVENT_ID,
        OpenApiParameter(
            "page_size",
            int,
            description=f"Rows a page: 1-{MAX_PAGE}, default {DEFAULT_PAGE}",
            examples=[OpenApiExample("a hundred", 100)],
        ),
        OpenApiParameter(
            "offset",
            int,
            description="Rows before this page (follow `next` rather than setting it)",
            examples=[OpenApiExample("second page", 1000)],
        ),
    ],
    responses={200: EventRowsSerializer, 404: OpenApiTypes.OBJECT, 410: OpenApiTypes.OBJECT},
    summary="The rows an event changed, from the binary log",
    operation_id="events_rows",
    description=(
        "Every row the event's binlog transaction changed, in the order the server changed them, "
        "with every column by name before and after, and the join's confidence and evidence "
        "(`thread_id`, `unique_text_and_time`, `ordered_assignment`: linked; `ambiguous`: the event "
        "is one of several that fit, never shown as fact; `unlinked`: rows near a CALL that only a "
        "routine's body explains). An event no binlog row statement is tied to has no rows. Paged: "
        "follow `next`. 410 when the binlog file cannot be read any more."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def event_rows(request: Request, event_id: int) -> Response:
    event = get_object_or_404(Event, pk=event_id)
    offset, size = _page(request)
    trail.record(request, trail.Action.EVENT_VIEW, event=event.pk, server=event.server, what="rows")
    statements = statements_of(event)
    try:
        page = rows_page(statements, offset=offset, limit=size)
    except RowsUnavailable as e:
        raise Gone(str(e)) from None
    evidence: list[str] = []
    for s in statements:
        evidence += [e for e in s.evidence if e not in evidence]
    next_page = None
    if page.more:
        params = request.query_params.copy()
        params["offset"] = str(offset + len(page.rows))
        params["page_size"] = str(size)
        next_page = request.build_absolute_uri(request.path + "?" + params.urlencode())
    return Response(
        {
            "event": event.pk,
            "rows_changed": rows_changed_of([event])[event.pk],
            "confidence": confidence_of(statements),
            "evidence": evidence,
            "statements": [_statement(s) for s in statements],
            "count": page.total,
            "next": next_page,
            "rows": page.rows,
        }
    )


@extend_schema(
    parameters=[EVENT_ID],
    responses={
        (200, "text/plain"): OpenApiTypes.STR,
        404: OpenApiTypes.OBJECT,
        409: OpenApiTypes.OBJECT,
        410: OpenApiTypes.OBJECT,
    },
    summary="SQL that undoes an event's row changes (never executed by AuditWeb)",
    operation_id="events_flashback",
    description=(
        "Text for a person to check and run: a DELETE becomes INSERTs of the before images, an "
        "UPDATE sets the before images back by primary key, an INSERT is deleted; newest row first, "
        "in one transaction; generated columns left out where a CREATE TABLE in the logs names "
        "them; tables without a primary key matched on every column with LIMIT 1. Rows changed "
        "again later are overwritten by it: check them first. An event no binlog rows are tied to "
        "gets a script that changes nothing (it says so); 409 when the link is ambiguous or only a "
        "routine's."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def event_flashback_sql(request: Request, event_id: int) -> HttpResponse:
    event = get_object_or_404(Event, pk=event_id)
    statements = statements_of(event)
    confidence = confidence_of(statements)
    if statements and confidence not in BinlogStatement.SURE:
        raise Conflict(f"The rows are only possibly this event's ({confidence}): no flashback is written.")
    trail.record(request, trail.Action.EXPORT, event=event.pk, server=event.server, what="flashback")
    try:
        sql = event_flashback(event, statements)
    except RowsUnavailable as e:
        raise Gone(str(e)) from None
    return sql_download(sql, f"auditweb-flashback-event-{event.pk}.sql")


def sql_download(text: str, filename: str) -> HttpResponse:
    """Flashback SQL as a text/plain download (the event's, a case's, a table's time range)."""
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
