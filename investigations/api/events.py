"""The events API: the explorer's filter as a paged list and as a streamed NDJSON export, and the
event's output shape every other answer that shows an event reuses (DRF only at the edge)."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext
from datetime import UTC, datetime

from django.db.models import Manager
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.models import Event
from investigations import trail
from investigations.api.params import (
    CURSOR_PARAMETER,
    PAGE_SIZE_PARAMETER,
    filter_parameters,
    next_url,
    page_size,
    sort_parameter,
)
from investigations.query.binlog import rows_changed_of
from investigations.query.export import export_lines
from investigations.query.filters import DEFAULT_SORT, filter_events
from investigations.query.limits import TooSlow, time_limit
from investigations.query.pages import BadCursor, sorted_page
from investigations.raw import shown_part
from investigations.roles import Role, role_permission

SORTED_PAGE_MS = 15_000  # PostgreSQL stops a page's query after this long
SORT_TOO_SLOW = "This page took too long to find in this order: narrow the filter (a time range, a table)."


class SourcePositionSerializer(serializers.Serializer):
    file = serializers.CharField(help_text="Path of the source file as it was read")
    sha256 = serializers.CharField(help_text="SHA-256 of the file's bytes read so far")
    line = serializers.IntegerField(help_text="1-based line of the record's first line")
    offset = serializers.IntegerField(help_text="Byte offset of the record's first byte")


class UtcDateTimeField(serializers.DateTimeField):
    """Always UTC with microseconds (`2026-01-05T09:00:01.200000Z`), whatever TIME_ZONE the UI uses:
    a SIEM compares these as strings, so every time has the same shape."""

    def to_representation(self, value: datetime | None) -> str | None:
        if value is None:
            return None
        utc = value.astimezone(UTC)
        return f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S.%fZ")  # (%Y drops the zeros of 255)


class EventListSerializer(serializers.ListSerializer):
    """A list of events: their `rows_changed` looked up for the whole list at once."""

    def to_representation(self, data: Iterable[Event] | Manager[Event]) -> list:
        events = list(data.all() if isinstance(data, Manager) else data)
        self.context["rows_changed"] = rows_changed_of(events)
        return super().to_representation(events)


class EventSerializer(serializers.ModelSerializer):
    occurred_at = UtcDateTimeField(
        read_only=True, allow_null=True, help_text="UTC, microseconds; null when the log gave no usable time"
    )
    source = serializers.SerializerMethodField()
    session = serializers.CharField(source="session.key", read_only=True)
    client = serializers.SerializerMethodField()
    attribution = serializers.SerializerMethodField()
    definer = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="The account a SQL SECURITY DEFINER routine runs as (a CALL)",
    )
    sql = serializers.SerializerMethodField()
    sql_length = serializers.SerializerMethodField()
    rows_changed = serializers.SerializerMethodField()

    class Meta:
        model = Event
        list_serializer_class = EventListSerializer
        fields = [
            "id", "occurred_at", "server", "session", "user", "host", "ip", "connection_id", "database",
            "command", "statement_type", "tables", "destructive", "flags", "sql", "sql_length", "fingerprint",
            "rows_affected", "status", "source", "client", "attribution", "definer", "rows_changed",
        ]  # fmt: skip

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_rows_changed(self, event: Event) -> int | None:
        """Rows the event's binlog transaction changed (GET /api/v1/events/<id>/rows/ shows them);
        0 when a binary log covers its time and none of its rows are the event's; null where no
        binary log covers it, or where the event is only one of several that may have made them."""
        known = self.context.get("rows_changed")
        if known is None or event.pk not in known:
            return rows_changed_of([event])[event.pk]
        return known[event.pk]

    def get_sql(self, event: Event) -> str:
        """The statement, its first SHOWN_MAX_BYTES characters (`sql_length` says how many it has;
        the whole record is GET /api/v1/events/<id>/raw/)."""
        return shown_part(event.sql)

    def get_sql_length(self, event: Event) -> int:
        """Characters of the whole statement: more than `sql` holds when it was cut for the answer."""
        return len(event.sql)

    @extend_schema_field(serializers.ChoiceField(choices=list(Event.Attribution.choices), allow_null=True))
    def get_attribution(self, event: Event) -> str | None:
        """How the account is known: `record` (the record names it), `connect` (the connection's
        Connect or Change user, in the same file), `connect_earlier_file`, `inferred_reopen`
        (across a log reopening the logs could not prove), `unattributed`. Null: stored before
        AuditWeb recorded it."""
        return event.attribution or None

    def get_client(self, event: Event) -> dict:
        """The client program and operating-system user of the session, where the log names them."""
        return {"program": event.session.program, "os_user": event.session.os_user}

    @extend_schema_field(SourcePositionSerializer)
    def get_source(self, event: Event) -> dict:
        # (a plain dict: a SourcePositionSerializer per event cost more than the rest of the event)
        f = event.source_file
        return {"file": f.path, "sha256": f.sha256, "line": event.line, "offset": event.byte_offset}


class EventPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The following page, or null at the end")
    results = EventSerializer(many=True)


@extend_schema(
    parameters=[
        *filter_parameters(),
        sort_parameter(),
        CURSOR_PARAMETER,
        PAGE_SIZE_PARAMETER,
    ],
    responses=EventPageSerializer,
    summary="Normalized events, newest first (or as `sort` says)",
    description=(
        "Every statement and connection event the logs hold, filtered as the explorer filters "
        "(filters combine with AND), newest first (events whose time the log did not give come "
        "last), or by `sort`: a column (`time`, `server`, `user`, `host`, `database`, `type`, "
        "`table`), `-` first for descending, ties newest first. Pages go by a keyset cursor: "
        "follow `next` until it is null; events ingested meanwhile never shift or repeat what the "
        "next page holds. An unknown `sort` is refused (400)."
    ),
    operation_id="events_list",
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def event_list(request: Request) -> Response:
    flt = filter_events(request.query_params)
    if not flt.is_valid():
        raise ValidationError(flt.errors)
    try:
        # A column's order has no index (query.sorted_page): bounded in time as the explorer's.
        with time_limit(SORTED_PAGE_MS) if flt.sort_order != DEFAULT_SORT else nullcontext():
            page = sorted_page(
                flt.qs.select_related("session", "source_file"),
                flt.sort_order,
                request.query_params.get("cursor"),
                page_size(request.query_params),
            )
    except BadCursor as e:
        raise ValidationError({"cursor": str(e)}) from None
    except TooSlow:
        raise ValidationError({"sort": SORT_TOO_SLOW}) from None
    filters = trail.filters_of(request.query_params)
    trail.record(request, trail.Action.SEARCH, where="api", filters=filters, shown=len(page.items))
    next_page = next_url(request, "cursor", page.next_cursor)
    return Response({"next": next_page, "results": EventSerializer(page.items, many=True).data})


@extend_schema(
    parameters=[
        *filter_parameters(),
        OpenApiParameter(
            "schema",
            str,
            enum=["auditweb", "ecs"],
            description="`auditweb` (the fields of /api/v1/events/) or `ecs` (Elastic Common Schema names)",
            examples=[OpenApiExample("Elastic Common Schema", "ecs")],
        ),
    ],
    responses={(200, "application/x-ndjson"): OpenApiTypes.STR},
    summary="Every event of a filter as NDJSON, oldest first, streamed",
    operation_id="events_export",
    description=(
        "One JSON object a line, for bulk loading into Elastic, OpenSearch or a file. PostgreSQL "
        "builds each line and the lines are passed on as they come, so memory does not grow with "
        "the number of events (a million and more). The filters are those of /api/v1/events/."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def event_export(request: Request) -> StreamingHttpResponse:
    flt = filter_events(request.query_params)
    if not flt.is_valid():
        raise ValidationError(flt.errors)
    schema = request.query_params.get("schema", "auditweb")
    if schema not in ("auditweb", "ecs"):
        raise ValidationError({"schema": "`auditweb` or `ecs`."})
    trail.record(request, trail.Action.EXPORT, filters=trail.filters_of(request.query_params), schema=schema)
    response = StreamingHttpResponse(export_lines(flt.qs, schema), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="auditweb-events-{schema}.ndjson"'
    return response
