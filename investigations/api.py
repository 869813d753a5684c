"""REST API views: thin, over the same query layer as the pages."""

from __future__ import annotations

from contextlib import nullcontext

import django_filters
from django.http import QueryDict, StreamingHttpResponse
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.alerts import BadCursor as BadAlertCursor
from ingest.alerts import alert_cursor, alerts_after
from ingest.models import Alert
from investigations import audit
from investigations.export import events_as_api, export_lines
from investigations.openapi import EMPTY_MEANS_ANY
from investigations.query import (
    DEFAULT_SORT,
    STATEMENT_TYPE_PATTERN,
    BadCursor,
    EventFilter,
    TooSlow,
    filter_events,
    sorted_page,
    time_limit,
)
from investigations.roles import Role, role_permission
from investigations.serializers import (
    AlertPageSerializer,
    EventPageSerializer,
    EventSerializer,
    UtcDateTimeField,
)

API_PAGE_SIZE = 100
API_MAX_PAGE_SIZE = 1000
SORTED_PAGE_MS = 15_000  # PostgreSQL stops a page's query after this long
SORT_TOO_SLOW = "This page took too long to find in this order: narrow the filter (a time range, a table)."


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "investigations.auth.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):  # type: ignore[no-untyped-def]
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>`; make a key with `manage.py create_api_token USERNAME`.",
        }


_EVENT_EXAMPLES = {"table": "shop.orders", "statement_type": "DELETE", "since": "2026-01-05T00:00:00Z",
                   "until": "2026-01-06T00:00:00Z", "user": "alice", "host": "10.0.0.7", "server": "db1",
                   "database": "shop", "destructive": True, "flag": "no_where", "connection_id": 31,
                   "session": "db1/before-2026-01-05T09:00:00/31", "q": "orders",
                   "sort": "-server",
                   "fingerprint": "0x1C6B3F0A8E7D5C42"}  # fmt: skip


def param_parameters(filterset: type[django_filters.FilterSet], examples: dict) -> list[OpenApiParameter]:
    """A FilterSet's filters as documented query parameters (the filters are the one source of
    truth: their types, choices and help texts)."""
    parameters = []
    for name, f in filterset.base_filters.items():
        kind = OpenApiTypes.STR
        if isinstance(f, django_filters.NumberFilter):
            kind = OpenApiTypes.INT
        elif isinstance(f, django_filters.BooleanFilter):
            kind = OpenApiTypes.BOOL
        elif isinstance(f, django_filters.IsoDateTimeFilter):
            kind = OpenApiTypes.DATETIME
        choices = f.extra.get("choices") if isinstance(f, django_filters.ChoiceFilter) else None
        parameters.append(
            OpenApiParameter(
                name,
                kind,
                description=str(f.extra.get("help_text", "")),
                many=isinstance(f, django_filters.MultipleChoiceFilter),
                pattern=STATEMENT_TYPE_PATTERN if name == "statement_type" else None,
                # Statement types are open-ended: any upper-case phrase (the pattern) is taken, so
                # the classifier's known names are no enum (the schema would refuse what we accept).
                enum=[c[0] for c in choices] if choices and name != "statement_type" else None,
                examples=[OpenApiExample(name, value=examples[name])] if name in examples else [],
                extensions={EMPTY_MEANS_ANY: True},
            )
        )
    return parameters


def filter_parameters() -> list[OpenApiParameter]:
    """The explorer's event filters, as documented query parameters (without `sort`, which only
    the paged list applies: `sort_parameter`)."""
    return [p for p in param_parameters(EventFilter, _EVENT_EXAMPLES) if p.name != "sort"]


def sort_parameter() -> OpenApiParameter:
    return next(p for p in param_parameters(EventFilter, _EVENT_EXAMPLES) if p.name == "sort")


CURSOR_PARAMETER = OpenApiParameter(
    "cursor",
    str,
    description="Opaque cursor from a previous page's `next` link (follow `next` as it is)",
    examples=[OpenApiExample("a cursor", "WyIyMDI2LTAxLTA1VDA5OjAwOjAzLjQwMDAwMCswMDowMCIsIDEyMzRd")],
)
PAGE_SIZE_PARAMETER = OpenApiParameter(
    "page_size",
    int,
    description=f"Results a page: 1-{API_MAX_PAGE_SIZE}, default {API_PAGE_SIZE}",
    examples=[OpenApiExample("fifty", 50)],
)


def page_size(params: QueryDict) -> int:
    try:
        size = int(params.get("page_size", API_PAGE_SIZE))
    except ValueError:
        raise ValidationError({"page_size": "A whole number."}) from None
    return max(1, min(size, API_MAX_PAGE_SIZE))


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
    filters = audit.filters_of(request.query_params)
    audit.record(request, audit.Action.SEARCH, where="api", filters=filters, shown=len(page.items))
    next_url = None
    if page.next_cursor:
        params = request.query_params.copy()
        params["cursor"] = page.next_cursor
        next_url = request.build_absolute_uri(request.path + "?" + params.urlencode())
    return Response({"next": next_url, "results": EventSerializer(page.items, many=True).data})


@extend_schema(
    parameters=[
        OpenApiParameter(
            "after",
            str,
            description="The `cursor` of the last alert you saw; omit it to start from the first alert",
            examples=[OpenApiExample("after alert 1234", "1234")],
        ),
        PAGE_SIZE_PARAMETER,
    ],
    responses=AlertPageSerializer,
    summary="Alerts in the order they were stored, for SIEM polling",
    operation_id="alerts_list",
    description=(
        "Destructive, anti-forensic and privilege-changing events, and sources that became "
        "unhealthy (or healthy again). Keep the `cursor` of the last alert you saw and ask for "
        "`?after=<cursor>`: no alert is ever skipped or repeated, even while many workers ingest "
        "at once (an alert is served once every transaction older than it has ended)."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def alert_list(request: Request) -> Response:
    after = request.query_params.get("after") or None
    try:
        page = alerts_after(after, page_size(request.query_params), with_events=False)
    except BadAlertCursor as e:
        raise ValidationError({"after": str(e)}) from None
    next_url = None
    if page.more and page.next_cursor:
        params = request.query_params.copy()
        params["after"] = page.next_cursor
        next_url = request.build_absolute_uri(request.path + "?" + params.urlencode())
    return Response({"next": next_url, "cursor": page.next_cursor, "results": alerts_data(page.items)})


def alerts_data(alerts: list[Alert]) -> list[dict]:
    """The alerts as the feed shows them (AlertSerializer's fields, which document them), each event
    alert with its event as /api/v1/events/ shows it, built by PostgreSQL for the whole page at once
    (`export.events_as_api`). Plain dicts: DRF's serializer cost about 60 us an alert, a tenth of
    a poll's time budget for a page of 100 (a test keeps both alike)."""
    keys = [(a.event_time, bytes(a.event_hash)) for a in alerts if a.event_hash is not None]
    events = events_as_api(keys)
    utc = UtcDateTimeField().to_representation
    return [
        {
            "id": a.pk,
            "cursor": alert_cursor(a),
            "kind": a.kind,
            "server": a.server,
            "occurred_at": utc(a.event_time if a.event_hash is not None else a.created_at),
            "created_at": utc(a.created_at),
            "reason": a.reason,
            "event": events.get((a.event_time, bytes(a.event_hash))) if a.event_hash is not None else None,
            "source": {"id": a.source.pk, "name": a.source.name} if a.source is not None else None,
        }
        for a in alerts
    ]


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
    audit.record(request, audit.Action.EXPORT, filters=audit.filters_of(request.query_params), schema=schema)
    response = StreamingHttpResponse(export_lines(flt.qs, schema), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="auditweb-events-{schema}.ndjson"'
    return response
