"""Sessions (connections) in the API: a paged list with statement counts, and one session with its
events in log order, by keyset cursors as the pages use."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.models import Event, Session
from investigations import trail
from investigations.api.events import EventPageSerializer, EventSerializer, UtcDateTimeField
from investigations.api.params import (
    CURSOR_PARAMETER,
    PAGE_SIZE_PARAMETER,
    keyset,
    next_url,
    page_size,
    param_parameters,
    valid_qs,
)
from investigations.query.filters import filter_events
from investigations.query.pages import BadCursor, oldest_first_page
from investigations.query.sessions import SessionFilter, filter_sessions, statement_counts
from investigations.roles import Role, role_permission

ID_EXAMPLE = OpenApiExample("an id", 1234)
_SESSION_EXAMPLES = {"user": "bob", "host": "10.0.0.7", "server": "db1", "connection_id": 31,
                     "since": "2026-01-05T00:00:00Z", "until": "2026-01-06T00:00:00Z",
                     "destructive": True}  # fmt: skip


class SessionSerializer(serializers.ModelSerializer):
    """One connection of one server boot, as its log showed it."""

    started_at = UtcDateTimeField(read_only=True, allow_null=True, help_text="Its first record (UTC)")
    ended_at = UtcDateTimeField(read_only=True, allow_null=True, help_text="Its last record (UTC)")
    attributed = serializers.BooleanField(
        read_only=True, help_text="False: the connection began before the logs read, its user is unknown"
    )
    previous = serializers.IntegerField(
        source="previous_id",
        read_only=True,
        allow_null=True,
        help_text="The session this one followed on the same connection, by a change of user",
    )

    class Meta:
        model = Session
        fields = [
            "id", "key", "server", "boot", "connection_id", "user", "host", "ip", "program", "os_user",
            "database", "started_at", "ended_at", "attributed", "previous",
        ]  # fmt: skip


class SessionRowSerializer(SessionSerializer):
    statements = serializers.IntegerField(read_only=True, help_text="Events stored for the session")
    destructive = serializers.IntegerField(read_only=True, help_text="How many of them are destructive")

    class Meta(SessionSerializer.Meta):
        fields = [*SessionSerializer.Meta.fields, "statements", "destructive"]


class SessionPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The following page, or null at the end")
    results = SessionRowSerializer(many=True)


class SessionDetailSerializer(SessionRowSerializer):
    events = EventPageSerializer(help_text="Its events in log order (oldest first), a page at a time")

    class Meta(SessionRowSerializer.Meta):
        fields = [*SessionRowSerializer.Meta.fields, "events"]


def _with_counts(sessions: list[Session]) -> list[Session]:
    counts = statement_counts([s.pk for s in sessions])
    for s in sessions:
        s.statements, s.destructive = counts.get(s.pk, (0, 0))  # type: ignore[attr-defined]  # for the serializer only
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
    page = keyset(valid_qs(filter_sessions(request.query_params)), request, field="started_at")
    return Response(
        {
            "next": next_url(request, "cursor", page.next_cursor),
            "results": SessionRowSerializer(_with_counts(page.items), many=True).data,
        }
    )


@extend_schema(
    parameters=[
        OpenApiParameter(
            "session_id", int, OpenApiParameter.PATH, description="The session's `id`", examples=[ID_EXAMPLE]
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
    trail.record(request, trail.Action.SESSION_VIEW, session=session.pk, server=session.server)
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
        "next": next_url(request, "cursor", page.next_cursor),
        "results": EventSerializer(page.items, many=True).data,
    }
    return Response(data)
