"""The alerts feed for SIEM polling: destructive and anti-forensic events and source-health changes,
in the order AuditWeb stored them, by a cursor that never skips or repeats one."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.alerts import BadCursor as BadAlertCursor
from ingest.alerts import alert_cursor, alerts_after
from ingest.models import Alert
from investigations.api.events import EventSerializer, UtcDateTimeField
from investigations.api.params import PAGE_SIZE_PARAMETER, next_url, page_size
from investigations.query.export import events_as_api
from investigations.roles import Role, role_permission

_UTC = UtcDateTimeField()


class AlertSerializer(serializers.ModelSerializer):
    cursor = serializers.SerializerMethodField(help_text="Give it as `after` to get the alerts that follow")
    created_at = UtcDateTimeField(read_only=True, help_text="When AuditWeb raised the alert (UTC)")
    occurred_at = serializers.SerializerMethodField()
    event = serializers.SerializerMethodField()
    source = serializers.SerializerMethodField()

    class Meta:
        model = Alert
        fields = ["id", "cursor", "kind", "server", "occurred_at", "created_at", "reason", "event", "source"]

    def get_cursor(self, alert: Alert) -> str:
        return alert_cursor(alert)

    @extend_schema_field(UtcDateTimeField(allow_null=True))
    def get_occurred_at(self, alert: Alert) -> str | None:
        """The event's time, or when the trouble was found (UTC)."""
        return _UTC.to_representation(alert.event_time if alert.event_hash else alert.created_at)

    @extend_schema_field(EventSerializer(allow_null=True))
    def get_event(self, alert: Alert) -> dict | None:
        """The event, for event alerts: looked up for the whole page by the view (`alerts_data`),
        or attached by `ingest.alerts.alerts_after`. Null also if the event is not in the store."""
        if alert.event_hash is None:
            return None
        shown = self.context.get("events")
        if shown is not None:
            return shown.get(alert.event_id) if alert.event_id is not None else None
        event = getattr(alert, "event", None)
        return EventSerializer(event).data if event is not None else None

    def get_source(self, alert: Alert) -> dict | None:
        """The source, for source-health alerts: its id and name."""
        if alert.source is None:
            return None
        return {"id": alert.source.pk, "name": alert.source.name}


class AlertPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The following page while one is ready, else null")
    cursor = serializers.CharField(
        allow_null=True, help_text="Where to go on from next time (the last alert's cursor, or the one given)"
    )
    results = AlertSerializer(many=True)


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
    next_page = next_url(request, "after", page.next_cursor if page.more else None)
    return Response({"next": next_page, "cursor": page.next_cursor, "results": alerts_data(page.items)})


def alerts_data(alerts: list[Alert]) -> list[dict]:
    """The alerts as the feed shows them (AlertSerializer's fields, which document them), each event
    alert with its event as /api/v1/events/ shows it, built by PostgreSQL for the whole page at once
    (`query.export.events_as_api`). Plain dicts: DRF's serializer cost about 60 us an alert, a tenth of
    a poll's time budget for a page of 100 (a test keeps both alike)."""
    events = events_as_api([a.event_id for a in alerts if a.event_id is not None])
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
            "event": events.get(a.event_id) if a.event_id is not None else None,
            "source": {"id": a.source.pk, "name": a.source.name} if a.source is not None else None,
        }
        for a in alerts
    ]
