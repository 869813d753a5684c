"""REST API of cases: cases, their evidence (one pin or many) and notes, the same workflows as the
pages (`investigations.cases`). Reading needs the investigator role; changing a case needs being
one of its investigators, or an admin."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.models import Event
from investigations import trail
from investigations.api.events import EventSerializer, UtcDateTimeField
from investigations.api.schema import EMPTY_MEANS_ANY
from investigations.bulk_pins import record_pins
from investigations.cases import (
    MAX_PINS_PER_REQUEST,
    AlreadyPinned,
    CaseClosed,
    can_change_case,
    case_create,
    case_set_status,
    evidence_pin,
    evidence_pin_many,
    evidence_remove,
    note_add,
)
from investigations.models import MAX_CASE_TEXT, Case, CaseNote, Evidence
from investigations.reports import content
from investigations.roles import Role, role_permission

EVIDENCE_PAGE = 100


class CaseSerializer(serializers.ModelSerializer):
    investigators = serializers.SlugRelatedField(
        slug_field="username", many=True, read_only=True, help_text="Logins that may change the case"
    )
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    created_at = UtcDateTimeField(read_only=True)
    updated_at = UtcDateTimeField(read_only=True)
    closed_at = UtcDateTimeField(read_only=True, allow_null=True)
    window_start = UtcDateTimeField(allow_null=True, help_text="Start of the time investigated (UTC)")
    window_end = UtcDateTimeField(allow_null=True, help_text="End of the time investigated (UTC)")
    evidence_count = serializers.SerializerMethodField(help_text="Events pinned to it")

    class Meta:
        model = Case
        fields = [
            "id",
            "title",
            "description",
            "status",
            "investigators",
            "created_by",
            "created_at",
            "updated_at",
            "closed_at",
            "window_start",
            "window_end",
            "evidence_count",
        ]
        read_only_fields = fields

    def get_evidence_count(self, case: Case) -> int:
        return case.evidence.count()


class CaseInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    description = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_CASE_TEXT
    )
    status = serializers.ChoiceField(choices=Case.Status.choices, required=False)
    window_start = serializers.DateTimeField(required=False, allow_null=True, help_text="ISO 8601")
    window_end = serializers.DateTimeField(required=False, allow_null=True, help_text="ISO 8601")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        start, end = data.get("window_start"), data.get("window_end")
        if start and end and end < start:
            raise ValidationError({"window_end": "The window ends before it starts."})
        return data


class EvidenceSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="Its place in the case's time order, from 1")
    event_id = serializers.IntegerField(source="pin.event_id")
    integrity = serializers.ChoiceField(
        choices=[content.AS_PINNED, content.CHANGED, content.MISSING],
        help_text="The stored event's time and record hash against those it had when pinned",
    )
    pinned_occurred_at = UtcDateTimeField(source="pin.event_occurred_at", allow_null=True)
    pinned_record_hash = serializers.SerializerMethodField(
        help_text="Hex; the event's record hash when pinned"
    )
    note = serializers.CharField(source="pin.note")
    pinned_by = serializers.CharField(source="pin.pinned_by.username")
    pinned_at = UtcDateTimeField(source="pin.pinned_at")
    event = serializers.SerializerMethodField(help_text="The stored event now; null when it is gone")

    def get_pinned_record_hash(self, item: content.Item) -> str:
        return bytes(item.pin.event_record_hash).hex()

    @extend_schema_field(EventSerializer(allow_null=True))
    def get_event(self, item: content.Item) -> dict[str, Any] | None:
        return EventSerializer(item.event).data if item.event is not None else None


class EvidencePageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    results = EvidenceSerializer(many=True)


class EvidenceInputSerializer(serializers.Serializer):
    event = serializers.IntegerField(help_text="The event's `id` (as /api/v1/events/ gives it)")
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_CASE_TEXT)


class NoteSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username", read_only=True)
    created_at = UtcDateTimeField(read_only=True)

    class Meta:
        model = CaseNote
        fields = ["id", "author", "text", "created_at"]
        read_only_fields = ["id", "author", "created_at"]
        extra_kwargs = {"text": {"max_length": MAX_CASE_TEXT}}


def id_parameter(name: str, what: str, example: int = 1) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        int,
        OpenApiParameter.PATH,
        description=f"The {what}'s `id`",
        examples=[OpenApiExample(str(example), example)],
    )


CASE_ID = id_parameter("case_id", "case")


def case_for(request: Request, case_id: int, *, change: bool = False) -> Case:
    case = get_object_or_404(Case.objects.select_related("created_by"), pk=case_id)
    if change and request.method != "GET" and not can_change_case(request.user, case):
        raise PermissionDenied("Only the case's investigators (and admins) may change it.")
    return case


def valid_data(serializer: serializers.Serializer) -> dict[str, Any]:
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


@extend_schema(
    parameters=[
        OpenApiParameter(
            "status",
            str,
            enum=["open", "closed"],
            description="Only open or only closed cases (default: all)",
            examples=[OpenApiExample("open", "open")],
            extensions={EMPTY_MEANS_ANY: True},
        )
    ],
    request=CaseInputSerializer,
    responses={200: CaseSerializer(many=True), 201: CaseSerializer},
    summary="Cases",
    description="GET lists the cases, most recently worked on first; POST opens one, with the caller as "
    "its first investigator.",
    examples=[
        OpenApiExample(
            "a new case",
            {
                "title": "shop.orders emptied",
                "description": "Orders vanished overnight",
                "window_start": "2026-03-04T22:00:00Z",
                "window_end": "2026-03-05T06:00:00Z",
            },
            request_only=True,
        )
    ],
)
@api_view(["GET", "POST"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def case_list(request: Request) -> Response:
    wanted = request.query_params.get("status", "")
    if wanted and wanted not in Case.Status.values:  # a misspelt status must not list every case
        raise ValidationError({"status": "open or closed."})
    if request.method == "POST":
        data = valid_data(CaseInputSerializer(data=request.data))
        data.pop("status", None)
        case = case_create(user=request.user, **data)
        trail.record(request, trail.Action.CASE_CREATE, case=case.pk, title=case.title)
        return Response(CaseSerializer(case).data, status=status.HTTP_201_CREATED)
    cases = Case.objects.select_related("created_by").prefetch_related("investigators")
    if wanted:
        cases = cases.filter(status=wanted)
    return Response(CaseSerializer(cases.order_by("-updated_at", "-pk")[:1000], many=True).data)


@extend_schema(
    parameters=[CASE_ID],
    request=CaseInputSerializer(partial=True),
    responses=CaseSerializer,
    summary="One case",
    description="GET shows the case; PATCH changes the fields given (`status`: open or closed).",
    examples=[OpenApiExample("close it", {"status": "closed"}, request_only=True)],
)
@api_view(["GET", "PATCH"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def case_detail(request: Request, case_id: int) -> Response:
    case = case_for(request, case_id, change=True)
    if request.method == "PATCH":
        data = valid_data(CaseInputSerializer(data=request.data, partial=True))
        new_status = data.pop("status", None)
        for name, value in data.items():
            setattr(case, name, value)
        case.save()
        if new_status and new_status != case.status:
            case_set_status(case=case, status=new_status)
        changed = [*data, *(["status"] if new_status else [])]
        trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="edit", changed=changed)
    return Response(CaseSerializer(case).data)


@extend_schema(
    parameters=[
        CASE_ID,
        OpenApiParameter(
            "page", int, description=f"Page of {EVIDENCE_PAGE} (from 1)", examples=[OpenApiExample("2", 2)]
        ),
    ],
    request=EvidenceInputSerializer,
    responses={200: EvidencePageSerializer, 201: EvidenceSerializer, 409: OpenApiTypes.OBJECT},
    summary="A case's evidence",
    description="GET lists the pinned events in time order, each with the stored event and whether it "
    "still has the time and record hash it was pinned with; POST pins an event (201; 409 when it "
    "is pinned already or the case is closed).",
    examples=[OpenApiExample("pin an event", {"event": 1234, "note": "the DELETE"}, request_only=True)],
)
@api_view(["GET", "POST"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def case_evidence(request: Request, case_id: int) -> Response:
    case = case_for(request, case_id, change=True)
    if request.method == "POST":
        data = valid_data(EvidenceInputSerializer(data=request.data))
        event = Event.objects.filter(pk=data["event"]).first()
        if event is None:
            raise ValidationError({"event": f"No event has id {data['event']}."})
        try:
            pin = evidence_pin(case=case, event=event, user=request.user, note=data["note"])
        except (AlreadyPinned, CaseClosed) as exc:
            return Response({"detail": _conflict(exc)}, status=status.HTTP_409_CONFLICT)
        trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="pin", event=event.pk)
        item = content.Item(number=_number_of(pin), pin=pin, event=event)
        return Response(EvidenceSerializer(item).data, status=status.HTTP_201_CREATED)
    paginator = Paginator(content.evidence_pins(case), EVIDENCE_PAGE)
    try:
        page = paginator.page(request.query_params.get("page", 1))
    except Exception:
        raise ValidationError({"page": f"A page from 1 to {paginator.num_pages}."}) from None
    events = Event.objects.select_related("source_file", "session").filter(id__in=[p.event_id for p in page])
    by_id = {e.id: e for e in events}
    first = (page.number - 1) * EVIDENCE_PAGE
    items = [content.Item(first + n + 1, pin, by_id.get(pin.event_id)) for n, pin in enumerate(page)]
    next_url = None
    if page.has_next():
        params = request.query_params.copy()
        params["page"] = str(page.next_page_number())
        next_url = request.build_absolute_uri(request.path + "?" + params.urlencode())
    return Response(
        {"count": paginator.count, "next": next_url, "results": EvidenceSerializer(items, many=True).data}
    )


class BulkEvidenceInputSerializer(serializers.Serializer):
    events = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        min_length=1,
        max_length=MAX_PINS_PER_REQUEST,
        help_text=f"Event ids (as /api/v1/events/ gives them), at most {MAX_PINS_PER_REQUEST}",
    )
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_CASE_TEXT)


class BulkEvidenceSerializer(serializers.Serializer):
    pinned = serializers.ListField(child=serializers.IntegerField(), help_text="Pinned now")
    already_pinned = serializers.ListField(
        child=serializers.IntegerField(), help_text="In the case before (left as they were)"
    )
    missing = serializers.ListField(child=serializers.IntegerField(), help_text="No such event in the store")


@extend_schema(
    parameters=[CASE_ID],
    request=BulkEvidenceInputSerializer,
    responses={200: BulkEvidenceSerializer, 409: OpenApiTypes.OBJECT},
    summary="Pin several events",
    description=f"Pins up to {MAX_PINS_PER_REQUEST} events in one transaction, each keeping its time and "
    "record hash as a single pin does. Idempotent: events already in the case are listed in "
    "`already_pinned`, ids of no stored event in `missing`; 409 when the case is closed.",
    examples=[
        OpenApiExample("pin three", {"events": [1234, 1235, 1240], "note": "bob's wipe"}, request_only=True)
    ],
)
@api_view(["POST"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def case_evidence_bulk(request: Request, case_id: int) -> Response:
    case = case_for(request, case_id, change=True)
    data = valid_data(BulkEvidenceInputSerializer(data=request.data))
    try:
        with transaction.atomic():
            result = evidence_pin_many(
                case=case, event_ids=data["events"], user=request.user, note=data["note"]
            )
            record_pins(request, case, result, via="api")
    except CaseClosed as exc:
        return Response({"detail": _conflict(exc)}, status=status.HTTP_409_CONFLICT)
    body = {"pinned": result.pinned, "already_pinned": result.already, "missing": result.missing}
    return Response(BulkEvidenceSerializer(body).data)


def _conflict(exc: Exception) -> str:
    return (
        "The event is already pinned to this case."
        if isinstance(exc, AlreadyPinned)
        else "The case is closed."
    )


def _number_of(pin: Evidence) -> int:
    """A pin's place in its case's time order (as the reports number it)."""
    pins = Evidence.objects.filter(case_id=pin.case_id)
    return pins.count() - pins.filter(content.after_pin(pin.event_occurred_at, pin.event_id)).count()


@extend_schema(
    parameters=[CASE_ID, id_parameter("event_id", "pinned event", 1234)],
    request=None,
    responses={204: None, 409: OpenApiTypes.OBJECT},
    summary="Unpin an event",
    description="Removes the event from the case's evidence (204, also when it was not pinned); 409 when "
    "the case is closed.",
)
@api_view(["DELETE"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def case_evidence_remove(request: Request, case_id: int, event_id: int) -> Response:
    case = case_for(request, case_id, change=True)
    try:
        evidence_remove(case=case, event_id=event_id)
    except CaseClosed as exc:
        return Response({"detail": _conflict(exc)}, status=status.HTTP_409_CONFLICT)
    trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="unpin", event=event_id)
    return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(
    parameters=[CASE_ID],
    request=NoteSerializer,
    responses={200: NoteSerializer(many=True), 201: NoteSerializer, 409: OpenApiTypes.OBJECT},
    summary="A case's notes",
    description="GET lists the analysts' notes, oldest first, with author and time; POST writes one "
    "(signed by the caller, timestamped; 409 when the case is closed).",
    examples=[OpenApiExample("a note", {"text": "bob's session began at 22:14"}, request_only=True)],
)
@api_view(["GET", "POST"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def case_notes(request: Request, case_id: int) -> Response:
    case = case_for(request, case_id, change=True)
    if request.method == "POST":
        data = valid_data(NoteSerializer(data=request.data))
        try:
            note = note_add(case=case, user=request.user, text=data["text"])
        except CaseClosed as exc:
            return Response({"detail": _conflict(exc)}, status=status.HTTP_409_CONFLICT)
        trail.record(request, trail.Action.CASE_CHANGE, case=case.pk, what="note", note=note.pk)
        return Response(NoteSerializer(note).data, status=status.HTTP_201_CREATED)
    return Response(NoteSerializer(content.notes(case), many=True).data)
