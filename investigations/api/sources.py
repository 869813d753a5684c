"""REST API for sources and their runs: validation by ingest.sources.SourceForm (as the pages),
runs started by ingest.follow.source_ingest_now (as the pages)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.follow import source_ingest_now
from ingest.health import STATES
from ingest.models import IngestRun, Source
from ingest.pipeline import redact_dsn
from ingest.sources import Health, SourceForm, source_health
from ingest.tasks import ingest_source_task
from investigations import trail
from investigations.roles import Role, role_permission


class HealthSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["ok", "unhealthy", "waiting", "off"])
    reasons = serializers.ListField(child=serializers.CharField())
    logging_off_event = serializers.IntegerField(allow_null=True)


class SourceSerializer(serializers.ModelSerializer):
    """A source with its health as the pages show it (`state`, `state_reason`; ingest.health)."""

    dsn = serializers.SerializerMethodField()
    health = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField(
        help_text="alive, suspect, dead, failed, waiting (no data yet), finished (read once) or off"
    )
    state_reason = serializers.SerializerMethodField(help_text="Why it is in its state, in a sentence")
    last_data_at = serializers.SerializerMethodField(help_text="When it last delivered new bytes or rows")
    expected_interval_seconds = serializers.SerializerMethodField(
        help_text="The usual gap between its deliveries, learnt from the recent ones (null: too few yet)"
    )
    suspect_after_seconds = serializers.SerializerMethodField(
        help_text="The silence after which a followed source is suspect (null: not followed)"
    )

    class Meta:
        model = Source
        fields = [
            "id", "name", "kind", "path", "dsn", "password_env", "format", "server", "timezone",
            "log_line_prefix", "interval_seconds", "quiet_seconds", "enabled", "health", "state",
            "state_reason", "last_polled_at", "last_data_at", "expected_interval_seconds",
            "suspect_after_seconds",
        ]  # fmt: skip
        read_only_fields = fields

    def _health(self, source: Source) -> Health:
        """Judged once per source and response (five fields come from it)."""
        cache = self.context.setdefault("health", {})
        if source.pk not in cache:
            cache[source.pk] = source_health(source)
        health: Health = cache[source.pk]
        return health

    def get_dsn(self, source: Source) -> str:
        return redact_dsn(source.dsn) if source.dsn else ""  # never a password

    @extend_schema_field(HealthSerializer)
    def get_health(self, source: Source) -> dict[str, object]:
        return self._health(source).as_dict()

    @extend_schema_field(serializers.ChoiceField(choices=list(STATES)))
    def get_state(self, source: Source) -> str:
        return self._health(source).state

    @extend_schema_field(serializers.CharField())
    def get_state_reason(self, source: Source) -> str:
        return self._health(source).reason

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_last_data_at(self, source: Source) -> str | None:
        when = self._health(source).last_data_at
        return serializers.DateTimeField().to_representation(when) if when else None

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_expected_interval_seconds(self, source: Source) -> float | None:
        return self._health(source).expected_seconds

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_suspect_after_seconds(self, source: Source) -> float | None:
        looked = self._health(source)
        return looked.suspect_after if source.enabled and source.kind != Source.Kind.UPLOAD else None


class IngestRunSerializer(serializers.ModelSerializer):
    rate = serializers.FloatField(read_only=True, allow_null=True)
    eta_seconds = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = IngestRun
        fields = [
            "id", "source", "status", "started_at", "finished_at", "bytes_read", "bytes_total",
            "events_seen", "events_stored", "problems", "error", "rate", "eta_seconds",
        ]  # fmt: skip
        read_only_fields = fields


class SourceInputSerializer(serializers.ModelSerializer):
    """What a client may send to create or change a source (SourceForm checks it)."""

    class Meta:
        model = Source
        fields = SourceForm.Meta.fields


def _fields(request: Request) -> dict:
    """The request's fields: a JSON object or a form (anything else is refused, not crashed on)."""
    if not hasattr(request.data, "items"):
        raise ValidationError({"detail": "Send the source's fields as a JSON object."})
    return dict(request.data.items())


def _with_defaults(fields: dict) -> dict:
    """The fields a client left out, at their model defaults.

    A form reads a field that is not sent as empty: a required error for a number with a
    default (quiet_seconds), False for a checkbox (enabled). An API client that sends only
    the fields it cares about must get the defaults the schema promises instead.
    """
    for name in SourceForm.Meta.fields:
        field = Source._meta.get_field(name)
        if name not in fields and field.has_default():
            fields[name] = field.get_default()
    return fields


def _form_errors(form: SourceForm) -> ValidationError:
    return ValidationError({name: [str(e) for e in errors] for name, errors in form.errors.items()})


_SOURCE_ID = OpenApiParameter(
    "source_id",
    int,
    OpenApiParameter.PATH,
    description="The source's `id`",
    examples=[OpenApiExample("1", 1)],
)
_NEW_SOURCE = OpenApiExample(
    "a general log and its rotations",
    request_only=True,
    value={
        "name": "db1 general log",
        "kind": "file",
        "path": "/var/log/mysql/general.log*",
        "format": "general-log",
        "server": "db1",
        "timezone": "UTC",
        "interval_seconds": 60,
    },
)


@extend_schema(
    request=SourceInputSerializer,
    responses={200: SourceSerializer(many=True), 201: SourceSerializer},
    summary="Sources",
    description="GET lists every source with its health; POST adds one (the fields of the Sources page).",
    examples=[_NEW_SOURCE],
)
@api_view(["GET", "POST"])
@permission_classes([role_permission(Role.VIEWER, write=Role.ADMIN)])
def source_list(request: Request) -> Response:
    if request.method == "POST":
        form = SourceForm(_with_defaults(_fields(request)))
        if not form.is_valid():
            raise _form_errors(form)
        source = form.save()
        trail.record(request, trail.Action.SOURCE_CREATE, source=source.pk, name=source.name)
        return Response(SourceSerializer(source).data, status=status.HTTP_201_CREATED)
    return Response(SourceSerializer(Source.objects.order_by("name"), many=True).data)


@extend_schema(
    parameters=[_SOURCE_ID],
    request=SourceInputSerializer,
    responses=SourceSerializer,
    summary="One source",
    description="GET shows it with its health; PATCH changes the fields given and leaves the others.",
    examples=[OpenApiExample("switch it off", {"enabled": False}, request_only=True)],
)
@api_view(["GET", "PATCH"])
@permission_classes([role_permission(Role.VIEWER, write=Role.ADMIN)])
def source_detail(request: Request, source_id: int) -> Response:
    source = get_object_or_404(Source, pk=source_id)
    if request.method == "PATCH":
        data = {name: getattr(source, name) for name in SourceForm.Meta.fields}
        data.update(_fields(request))
        form = SourceForm(data, instance=source)
        if not form.is_valid():
            raise _form_errors(form)
        changed = form.changed_data
        source = form.save()
        trail.record(request, trail.Action.SOURCE_EDIT, source=source.pk, name=source.name, changed=changed)
    return Response(SourceSerializer(source).data)


@extend_schema(
    parameters=[_SOURCE_ID],
    request=None,
    responses={202: IngestRunSerializer},
    summary="Ingest what is new now",
    description="Queues a run of the source now, without waiting for its interval; answers 202 with the run.",
)
@api_view(["POST"])
@permission_classes([role_permission(Role.ADMIN)])
def source_ingest(request: Request, source_id: int) -> Response:
    source = get_object_or_404(Source, pk=source_id)
    run = source_ingest_now(source, lambda s, r: ingest_source_task.delay(s, r))
    trail.record(request, trail.Action.SOURCE_INGEST, source=source.pk, name=source.name, run=run.pk)
    return Response(IngestRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(
    parameters=[
        OpenApiParameter(
            "run_id",
            int,
            OpenApiParameter.PATH,
            description="The run's `id`",
            examples=[OpenApiExample("7", 7)],
        )
    ],
    responses=IngestRunSerializer,
    summary="An ingest run and its progress",
    description="Status, bytes read of the total, events stored, problems, rate and ETA of one run.",
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def ingest_run_detail(request: Request, run_id: int) -> Response:
    return Response(IngestRunSerializer(get_object_or_404(IngestRun, pk=run_id)).data)
