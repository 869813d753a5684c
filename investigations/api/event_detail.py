"""One event in the API: its detail with its session around it and the proof of its account, and its
raw bytes (withheld where they hold a secret: downloaded or revealed by an admin, with a reason)."""

from __future__ import annotations

import base64

from django.http import HttpResponseBase, QueryDict
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.models import Event
from investigations import trail
from investigations.api.events import EventSerializer, UtcDateTimeField
from investigations.api.sessions import ID_EXAMPLE, SessionSerializer
from investigations.query.attribution import attribution_proof
from investigations.query.sessions import session_context
from investigations.raw import (
    RAW_FIELDS,
    raw_download,
    raw_event,
    raw_refusal,
    raw_withheld,
    reason_error,
    reveal_raw,
    shown_part,
    shown_raw,
)
from investigations.roles import Role, role_permission

CONTEXT_DEFAULT = 10  # statements before and after an event, as its page shows
CONTEXT_MAX = 100
_UTC = UtcDateTimeField()


class ContextEventSerializer(serializers.ModelSerializer):
    """A neighbour of the event in its session, in short."""

    occurred_at = UtcDateTimeField(read_only=True, allow_null=True)

    class Meta:
        model = Event
        fields = ["id", "occurred_at", "command", "statement_type", "destructive", "flags", "sql"]


class EventContextSerializer(serializers.Serializer):
    session = SessionSerializer(help_text="The connection: user, host, client, when it began and ended")
    before = ContextEventSerializer(many=True, help_text="The session's statements just before, oldest first")
    after = ContextEventSerializer(many=True, help_text="The session's statements just after, oldest first")


class AttributionProofSerializer(serializers.Serializer):
    explained = serializers.CharField(help_text="How the account is known, in words")
    opened_by = serializers.DictField(
        allow_null=True,
        help_text="The Connect or Change user record that names the account: its event id, file, line, time",
    )
    evidence = serializers.CharField(
        allow_null=True, help_text="For inferred_reopen: what the logs show around the reopening"
    )
    previous_session = serializers.IntegerField(
        allow_null=True, help_text="The session before a change of user on the same connection"
    )
    corroboration = serializers.CharField(
        allow_null=True,
        help_text="For inferred_reopen: what the server's other logs say of the connection across it",
    )
    call = serializers.IntegerField(
        allow_null=True, help_text="For a statement run inside a routine (in_routine): the CALL's event id"
    )


class EventDetailSerializer(EventSerializer):
    raw = serializers.SerializerMethodField()
    raw_withheld = serializers.SerializerMethodField()
    raw_masked = serializers.SerializerMethodField()
    raw_length = serializers.SerializerMethodField()
    raw_download = serializers.SerializerMethodField()
    context = serializers.SerializerMethodField()
    attribution_proof = serializers.SerializerMethodField()

    class Meta(EventSerializer.Meta):
        fields = [
            *EventSerializer.Meta.fields,
            "raw",
            "raw_length",
            "raw_download",
            "raw_withheld",
            "raw_masked",
            "context",
            "attribution_proof",
        ]

    @extend_schema_field(AttributionProofSerializer)
    def get_attribution_proof(self, event: Event) -> dict:
        """Why the event is its account's: the login record, the evidence, the session before."""
        proof = self.context["proof"]
        opened = proof.opened_by
        return {
            "explained": proof.explained,
            "opened_by": {
                "id": opened.pk,
                "command": opened.command,
                "file": opened.source_file.path,
                "line": opened.line,
                "offset": opened.byte_offset,
                "occurred_at": _UTC.to_representation(opened.occurred_at),
            }
            if opened is not None
            else None,
            "evidence": proof.evidence.detail if proof.evidence is not None else None,
            "previous_session": proof.previous.pk if proof.previous is not None else None,
            "corroboration": proof.corroboration,
            "call": proof.call.pk if proof.call is not None else None,
        }

    def get_raw(self, event: Event) -> str | None:
        """The record's bytes exactly as read from the log, base64 (they may hold any byte); null
        when they hold a password or key (`raw_withheld`): an admin reveals them with
        POST /api/v1/events/<id>/reveal/."""
        if raw_withheld(event):
            return None
        return base64.b64encode(shown_part(bytes(event.raw))).decode("ascii")

    def get_raw_length(self, event: Event) -> int:
        """Bytes of the whole record: more than `raw` holds when it was cut for the answer (at
        SHOWN_MAX_BYTES); `raw_download` has them all."""
        return event.raw_length if event.raw_length is not None else len(event.raw)

    def get_raw_download(self, event: Event) -> str:
        """The URL of the whole raw bytes (`/api/v1/events/<id>/raw/`, streamed; a withheld
        record: POST with a `reason`, admins only)."""
        path = f"/api/v1/events/{event.pk}/raw/"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    def get_raw_withheld(self, event: Event) -> bool:
        """True when the raw bytes hold a secret (flag secret_masked): `raw` is null, `raw_masked` set."""
        return raw_withheld(event)

    def get_raw_masked(self, event: Event) -> str | None:
        """For a withheld record: its raw bytes cut where the secret may begin, base64; else null."""
        if not raw_withheld(event):
            return None
        return base64.b64encode(shown_part(shown_raw(event))).decode("ascii")

    @extend_schema_field(EventContextSerializer)
    def get_context(self, event: Event) -> dict:
        return EventContextSerializer(self.context["session_context"]).data


def _context_size(params: QueryDict) -> int:
    try:
        size = int(params.get("context", CONTEXT_DEFAULT))
    except ValueError:
        raise ValidationError({"context": "A whole number."}) from None
    return max(0, min(size, CONTEXT_MAX))


@extend_schema(
    parameters=[
        OpenApiParameter(
            "event_id", int, OpenApiParameter.PATH, description="The event's `id`", examples=[ID_EXAMPLE]
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
    trail.record(request, trail.Action.EVENT_VIEW, event=event.pk, server=event.server)
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
            "event_id", int, OpenApiParameter.PATH, description="The event's `id`", examples=[ID_EXAMPLE]
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
    event = get_object_or_404(Event.objects.only(*RAW_FIELDS, "server", "flags", "record_hash"), pk=event_id)
    reason = request.data.get("reason") if hasattr(request.data, "get") else None
    error = reason_error(reason)
    if error is not None:
        raise ValidationError({"reason": error})
    raw = reveal_raw(request, event, reason)
    body = {
        "id": event.pk,
        "raw": base64.b64encode(shown_part(raw)).decode("ascii"),
        "raw_length": len(raw),
        "record_hash": bytes(event.record_hash).hex(),
    }
    return Response(body, headers={"Cache-Control": "no-store"})


@extend_schema(
    parameters=[
        OpenApiParameter(
            "event_id", int, OpenApiParameter.PATH, description="The event's `id`", examples=[ID_EXAMPLE]
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
