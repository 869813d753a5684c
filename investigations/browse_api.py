"""REST API for what the investigation pages show: one event in its session, sessions, tables and a
table's history under all its names, and gaps. Each view calls the pages' query code
(`investigations.query`, `investigations.tables`); long lists go by keyset cursors, so a page
costs the same however deep, and events stored meanwhile never shift the next one."""

from __future__ import annotations

import base64

from django.db.models import QuerySet
from django.http import HttpResponseBase, QueryDict
from django.shortcuts import get_object_or_404
from django_filters import FilterSet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.models import Event, Session
from investigations import audit
from investigations.api import (
    CURSOR_PARAMETER,
    PAGE_SIZE_PARAMETER,
    filter_parameters,
    page_size,
    param_parameters,
)
from investigations.attribution import attribution_proof
from investigations.query import (
    BadCursor,
    GapFilter,
    Page,
    SessionFilter,
    filter_events,
    filter_gaps,
    filter_sessions,
    keyset_page,
    oldest_first_page,
    renamed_from,
    renamed_to,
    session_context,
    statement_counts,
)
from investigations.raw import raw_download, raw_event, raw_refusal, reason_error, reveal_raw, shown_part
from investigations.roles import Role, role_permission
from investigations.serializers import (
    EventDetailSerializer,
    EventSerializer,
    GapPageSerializer,
    GapSerializer,
    SessionDetailSerializer,
    SessionPageSerializer,
    SessionRowSerializer,
    TableHistorySerializer,
    TablePageSerializer,
    TableSerializer,
)
from investigations.tables import queue_tables_refresh, tables_seen, tables_seen_refresh_due

CONTEXT_DEFAULT = 10  # statements before and after an event, as its page shows
CONTEXT_MAX = 100
TABLES_MAX = 1000

_ID_EXAMPLE = OpenApiExample("an id", 1234)
_DAY = {"since": "2026-01-05T00:00:00Z", "until": "2026-01-06T00:00:00Z"}
_SESSION_EXAMPLES = {"user": "bob", "host": "10.0.0.7", "server": "db1", "connection_id": 31, **_DAY,
                     "destructive": True}  # fmt: skip
_GAP_EXAMPLES = {"server": "db1", "source": 1, **_DAY, "reason": "logging_off", "open": True}


def _next_url(request: Request, key: str, cursor: str | None) -> str | None:
    """This request's URL with `key` set to `cursor` (None at the end of the listing)."""
    if not cursor:
        return None
    params = request.query_params.copy()
    params[key] = cursor
    return request.build_absolute_uri(request.path + "?" + params.urlencode())


def _valid(flt: FilterSet) -> QuerySet:
    """The filter's queryset, or a 400 naming the parameters that are wrong."""
    if not flt.is_valid():
        raise ValidationError(flt.errors)
    return flt.qs


def _keyset(queryset: QuerySet, request: Request, field: str = "occurred_at") -> Page:
    try:
        params = request.query_params
        return keyset_page(queryset, params.get("cursor"), page_size(params), field)
    except BadCursor as e:
        raise ValidationError({"cursor": str(e)}) from None


def _context_size(params: QueryDict) -> int:
    try:
        size = int(params.get("context", CONTEXT_DEFAULT))
    except ValueError:
        raise ValidationError({"context": "A whole number."}) from None
    return max(0, min(size, CONTEXT_MAX))


@extend_schema(
    parameters=[
        OpenApiParameter(
            "event_id", int, OpenApiParameter.PATH, description="The event's `id`", examples=[_ID_EXAMPLE]
        ),
        OpenApiParameter(
            "context",
            int,
            description=f"Statements of the session shown before and after it: 0-{CONTEXT_MAX}, "
            f"default {CONTEXT_DEFAULT}",
            examples=[OpenApiExample("five", 5)],
        ),
    ],
    responses={200: EventDetailSerializer, 404: OpenApiTypes.OBJECT},
    summary="One event with its session around it",
    operation_id="events_retrieve",
    description=(
        "The event (the fields of /api/v1/events/), its raw bytes as read from the log (base64), "
        "and its session: who (user, host, ip, client program, operating-system user), when it "
        "began and ended, and the statements just before and after it in log order, as the event's "
        "page shows them."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def event_detail(request: Request, event_id: int) -> Response:
    event = get_object_or_404(Event.objects.select_related("session", "source_file"), pk=event_id)
    audit.record(request, audit.Action.EVENT_VIEW, event=event.pk, server=event.server)
    before, after = session_context(event, _context_size(request.query_params))
    context = {"session": event.session, "before": before, "after": after}
    proof = attribution_proof(event)
    serializer_context = {"session_context": context, "proof": proof, "request": request}
    return Response(EventDetailSerializer(event, context=serializer_context).data)


class RevealSerializer(serializers.Serializer):
    reason = serializers.CharField(help_text="Why the raw bytes are needed; recorded in the audit trail")


class RevealedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    raw = serializers.CharField(
        help_text="The record's exact bytes as read from the log, base64: the first SHOWN_MAX_BYTES of them"
    )
    raw_length = serializers.IntegerField(
        help_text="Bytes of the whole record; POST /api/v1/events/<id>/raw/ with the reason has them all"
    )
    record_hash = serializers.CharField(help_text="The record hash that seals them (hex)")


@extend_schema(
    parameters=[
        OpenApiParameter(
            "event_id", int, OpenApiParameter.PATH, description="The event's `id`", examples=[_ID_EXAMPLE]
        )
    ],
    request=RevealSerializer,
    responses={200: RevealedSerializer, 400: OpenApiTypes.OBJECT, 403: OpenApiTypes.OBJECT},
    summary="Reveal one event's raw bytes (admins)",
    description=(
        "The exact raw bytes of one event, including those withheld because they hold a password or "
        "key (`raw_withheld`). Admins only; the reason is required and recorded in the audit trail "
        "with the event."
    ),
)
@api_view(["POST"])
@permission_classes([role_permission(Role.ADMIN)])
def event_reveal(request: Request, event_id: int) -> Response:
    event = get_object_or_404(Event.objects.only("id", "server", "flags", "raw", "record_hash"), pk=event_id)
    reason = request.data.get("reason") if hasattr(request.data, "get") else None
    error = reason_error(reason)
    if error is not None:
        raise ValidationError({"reason": error})
    raw = reveal_raw(request, event, reason)
    body = {
        "id": event.pk,
        "raw": base64.b64encode(shown_part(raw)).decode("ascii"),  # type: ignore[arg-type]
        "raw_length": len(raw),
        "record_hash": bytes(event.record_hash).hex(),
    }
    return Response(body, headers={"Cache-Control": "no-store"})


@extend_schema(
    parameters=[
        OpenApiParameter(
            "event_id", int, OpenApiParameter.PATH, description="The event's `id`", examples=[_ID_EXAMPLE]
        )
    ],
    request=RevealSerializer,
    responses={
        (200, "application/octet-stream"): OpenApiTypes.BINARY,
        403: OpenApiTypes.OBJECT,
        404: OpenApiTypes.OBJECT,
    },
    summary="Download one event's whole raw bytes",
    description=(
        "The record's exact bytes as read from the log, all of them, streamed (answers show at most "
        "SHOWN_MAX_BYTES). A record that holds a password or key (`raw_withheld`) is refused with 403, "
        "except to an admin who POSTs a `reason`, recorded in the audit trail as a reveal. Every "
        "download is recorded. Header `X-Record-Hash`: the record hash that seals them."
    ),
)
@api_view(["GET", "POST"])
@permission_classes([role_permission(Role.VIEWER, write=Role.ADMIN)])
def event_raw(request: Request, event_id: int) -> HttpResponseBase:
    event = raw_event(event_id)
    if event is None:
        raise NotFound("No such event.")
    reason = None
    if request.method == "POST":
        reason = request.data.get("reason") if hasattr(request.data, "get") else None
        problem = reason_error(reason)  # a POST is a reveal: its reason is required, as documented
        if problem is not None:
            raise ValidationError({"reason": problem})
    refusal = raw_refusal(request, event, reason)
    if refusal is not None:
        raise PermissionDenied(refusal)
    return raw_download(request, event, reason)


def _with_counts(sessions: list[Session]) -> list[Session]:
    counts = statement_counts([s.pk for s in sessions])
    for s in sessions:
        s.statements, s.destructive = counts.get(s.pk, (0, 0))  # type: ignore[attr-defined]
    return sessions


@extend_schema(
    parameters=[*param_parameters(SessionFilter, _SESSION_EXAMPLES), CURSOR_PARAMETER, PAGE_SIZE_PARAMETER],
    responses=SessionPageSerializer,
    summary="Sessions (connections), newest first",
    operation_id="sessions_list",
    description=(
        "One row per connection of one server boot, newest start first, with how many statements it "
        "ran and how many of them were destructive. `since`/`until` bound when it began."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def session_list(request: Request) -> Response:
    page = _keyset(_valid(filter_sessions(request.query_params)), request, field="started_at")
    return Response(
        {
            "next": _next_url(request, "cursor", page.next_cursor),
            "results": SessionRowSerializer(_with_counts(page.items), many=True).data,
        }
    )


@extend_schema(
    parameters=[
        OpenApiParameter(
            "session_id", int, OpenApiParameter.PATH, description="The session's `id`", examples=[_ID_EXAMPLE]
        ),
        CURSOR_PARAMETER,
        PAGE_SIZE_PARAMETER,
    ],
    responses={200: SessionDetailSerializer, 404: OpenApiTypes.OBJECT},
    summary="One session and its events in log order",
    operation_id="sessions_retrieve",
    description=(
        "The connection and every event it ran, oldest first (time, then the order they were read; "
        "events whose time the log did not give come last), a page at a time: follow `events.next`."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def session_detail(request: Request, session_id: int) -> Response:
    session = get_object_or_404(Session, pk=session_id)
    audit.record(request, audit.Action.SESSION_VIEW, session=session.pk, server=session.server)
    events = filter_events({}, Event.objects.filter(session_id=session.pk)).qs
    try:
        page = oldest_first_page(
            events.select_related("session", "source_file"),
            request.query_params.get("cursor"),
            page_size(request.query_params),
        )
    except BadCursor as e:
        raise ValidationError({"cursor": str(e)}) from None
    data = SessionRowSerializer(_with_counts([session])[0]).data
    data["events"] = {
        "next": _next_url(request, "cursor", page.next_cursor),
        "results": EventSerializer(page.items, many=True).data,
    }
    return Response(data)


@extend_schema(
    parameters=[
        OpenApiParameter(
            "q",
            str,
            description="Text in the name (any case); empty: every table",
            examples=[OpenApiExample("orders", "orders")],
        ),
        OpenApiParameter(
            "after",
            str,
            description="Continue after this name (the `next` link sets it)",
            examples=[OpenApiExample("after shop.orders", "shop.orders")],
        ),
        PAGE_SIZE_PARAMETER,
    ],
    responses=TablePageSerializer,
    summary="Tables the events name, by name",
    operation_id="tables_list",
    description=(
        "Every `db.table` some event named, with how many events and destructive events, and the "
        "first and last time. The counts are kept and rebuilt in the background every few minutes "
        "(`refreshed_at`); names that only newer events mention are looked up on the fly."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def table_list(request: Request) -> Response:
    params = request.query_params
    size = min(page_size(params), TABLES_MAX)
    search, after = params.get("q", "").strip()[:400], params.get("after", "")[:400]
    if "\x00" in search + after:  # PostgreSQL text holds no NUL, and no table name has one
        raise ValidationError({"q": "No NUL characters."})
    tables_seen_refresh_due(queue_tables_refresh)
    listing = tables_seen(search, size, after=after)
    last = listing.tables[-1].name if listing.more and listing.tables else None
    return Response(
        {
            "next": _next_url(request, "after", last),
            "refreshed_at": TablePageSerializer()
            .fields["refreshed_at"]
            .to_representation(listing.refreshed_at),
            "unlisted": listing.unlisted,
            "results": TableSerializer(listing.tables, many=True, context={"request": request}).data,
        }
    )


_HISTORY_FILTERS = [p for p in filter_parameters() if p.name != "table"]


@extend_schema(
    parameters=[
        OpenApiParameter(
            "name",
            str,
            OpenApiParameter.PATH,
            description="`db.table`, or a bare name matching it in any database (URL-encoded)",
            examples=[OpenApiExample("orders", "shop.orders")],
        ),
        *_HISTORY_FILTERS,
        CURSOR_PARAMETER,
        PAGE_SIZE_PARAMETER,
    ],
    responses=TableHistorySerializer,
    summary="Everything that touched a table, following its renames",
    operation_id="tables_history",
    description=(
        "The events naming the table, newest first, and, from the moment of each rename (RENAME "
        "TABLE, ALTER TABLE ... RENAME), those naming it under its later names: what happened to "
        "`shop.orders_old` after `orders` became it is part of the history of `shop.orders`. The "
        "other event filters narrow it further (e.g. `destructive=true`)."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def table_history(request: Request, name: str) -> Response:
    params = request.query_params.copy()
    params["table"] = name
    events = _valid(filter_events(params)).select_related("session", "source_file")
    page = _keyset(events, request)
    filters = audit.filters_of(params)
    audit.record(request, audit.Action.SEARCH, where="api", filters=filters, shown=len(page.items))
    qualified = "." in name  # (renames are followed by qualified names, as the table page does)
    later = renamed_to([name]) if qualified else []
    earlier = renamed_from(name) if qualified else []
    return Response(
        TableHistorySerializer(
            {
                "name": name,
                "later_names": [{"name": n, "since": t} for n, t in later],
                "earlier_names": [{"name": n, "since": t} for n, t in earlier],
                "next": _next_url(request, "cursor", page.next_cursor),
                "results": page.items,
            }
        ).data
    )


@extend_schema(
    parameters=[
        *param_parameters(GapFilter, _GAP_EXAMPLES),
        CURSOR_PARAMETER,
        PAGE_SIZE_PARAMETER,
    ],
    responses=GapPageSerializer,
    summary="Gaps: time the logs show was not recorded",
    operation_id="gaps_list",
    description=(
        "Logging switched off (until the next record), the log (re)opened, a restart, the clock "
        "going back: from the last record before to the first after, newest first, with the record "
        "that shows it. `since`/`until` select gaps overlapping that window. The absence of evidence "
        "in a gap is not evidence of absence."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def gap_list(request: Request) -> Response:
    page = _keyset(_valid(filter_gaps(request.query_params)), request, field="started_at")
    return Response(
        {
            "next": _next_url(request, "cursor", page.next_cursor),
            "results": GapSerializer(page.items, many=True).data,
        }
    )
