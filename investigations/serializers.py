"""Output shapes of the REST API (DRF only at the edge)."""

from __future__ import annotations

from datetime import UTC, datetime

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ingest.alerts import alert_cursor
from ingest.models import Alert, Event


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
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventSerializer(serializers.ModelSerializer):
    occurred_at = UtcDateTimeField(
        read_only=True, allow_null=True, help_text="UTC, microseconds; null when the log gave no usable time"
    )
    source = serializers.SerializerMethodField()
    session = serializers.CharField(source="session.key", read_only=True)
    client = serializers.SerializerMethodField()

    class Meta:
        model = Event
        fields = [
            "id", "occurred_at", "server", "session", "user", "host", "ip", "connection_id", "database",
            "command", "statement_type", "tables", "destructive", "flags", "sql", "fingerprint",
            "rows_affected", "status", "source", "client",
        ]  # fmt: skip

    def get_client(self, event: Event) -> dict:
        """The client program and operating-system user of the session, where the log names them."""
        return {"program": event.session.program, "os_user": event.session.os_user}

    def get_source(self, event: Event) -> dict:
        f = event.source_file
        return SourcePositionSerializer(
            {"file": f.path, "sha256": f.sha256, "line": event.line, "offset": event.byte_offset}
        ).data


class EventPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The following page, or null at the end")
    results = EventSerializer(many=True)


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
        return UtcDateTimeField().to_representation(
            alert.event_time if alert.event_hash else alert.created_at
        )

    @extend_schema_field(EventSerializer(allow_null=True))
    def get_event(self, alert: Alert) -> dict | None:
        """The event, for event alerts (`ingest.alerts.alerts_after` attaches it)."""
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
