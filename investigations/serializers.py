"""Output shapes of the REST API (DRF only at the edge)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from urllib.parse import quote

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ingest.alerts import alert_cursor
from ingest.models import Alert, Event, Gap, Session
from investigations.models import TableSeen
from investigations.raw import raw_withheld, shown_part, shown_raw


class SourcePositionSerializer(serializers.Serializer):
    file = serializers.CharField(help_text="Path of the source file as it was read")
    sha256 = serializers.CharField(help_text="SHA-256 of the file's bytes read so far")
    line = serializers.IntegerField(help_text="1-based line of the record's first line")
    offset = serializers.IntegerField(help_text="Byte offset of the record's first byte")


class GapPositionSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The source's id")
    name = serializers.CharField(help_text="The source's name")
    file = serializers.CharField(help_text="Path of the file whose record shows the gap")
    line = serializers.IntegerField(help_text="Line of that record")
    offset = serializers.IntegerField(help_text="Byte offset of that record")


class UtcDateTimeField(serializers.DateTimeField):
    """Always UTC with microseconds (`2026-01-05T09:00:01.200000Z`), whatever TIME_ZONE the UI uses:
    a SIEM compares these as strings, so every time has the same shape."""

    def to_representation(self, value: datetime | None) -> str | None:
        if value is None:
            return None
        utc = value.astimezone(UTC)
        return f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S.%fZ")  # (%Y drops the zeros of 255)


_UTC = UtcDateTimeField()


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

    class Meta:
        model = Event
        fields = [
            "id", "occurred_at", "server", "session", "user", "host", "ip", "connection_id", "database",
            "command", "statement_type", "tables", "destructive", "flags", "sql", "sql_length", "fingerprint",
            "rows_affected", "status", "source", "client", "attribution", "definer",
        ]  # fmt: skip

    def get_sql(self, event: Event) -> str:
        """The statement, its first SHOWN_MAX_BYTES characters (`sql_length` says how many it has;
        the whole record is GET /api/v1/events/<id>/raw/)."""
        return shown_part(event.sql)  # type: ignore[return-value]

    def get_sql_length(self, event: Event) -> int:
        """Characters of the whole statement: more than `sql` holds when it was cut for the answer."""
        return len(event.sql)

    @extend_schema_field(
        serializers.ChoiceField(choices=Event.Attribution.choices, allow_null=True)  # type: ignore[arg-type]
    )
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
        """The event, for event alerts: looked up for the whole page by the view (`api.alerts_data`),
        or attached by `ingest.alerts.alerts_after`. Null also if the event is not in the store."""
        if alert.event_hash is None:
            return None
        shown = self.context.get("events")
        if shown is not None:
            return shown.get((alert.event_time, bytes(alert.event_hash)))
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
        return base64.b64encode(shown_part(bytes(event.raw))).decode("ascii")  # type: ignore[arg-type]

    def get_raw_length(self, event: Event) -> int:
        """Bytes of the whole record: more than `raw` holds when it was cut for the answer (at
        SHOWN_MAX_BYTES); `raw_download` has them all."""
        return len(event.raw)

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
        return base64.b64encode(shown_part(shown_raw(event))).decode("ascii")  # type: ignore[arg-type]

    @extend_schema_field(EventContextSerializer)
    def get_context(self, event: Event) -> dict:
        return EventContextSerializer(self.context["session_context"]).data


class TableSerializer(serializers.ModelSerializer):
    first_at = UtcDateTimeField(read_only=True, allow_null=True, help_text="First event naming it (UTC)")
    last_at = UtcDateTimeField(read_only=True, allow_null=True, help_text="Last event naming it (UTC)")
    history = serializers.SerializerMethodField()

    class Meta:
        model = TableSeen
        fields = ["name", "events", "destructive", "first_at", "last_at", "history"]

    def get_history(self, table: TableSeen) -> str:
        """The URL of its history (`/api/v1/tables/<name>/history/`)."""
        path = "/api/v1/tables/" + quote(table.name, safe="") + "/history/"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class TablePageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The following page, or null at the end")
    refreshed_at = UtcDateTimeField(
        allow_null=True, help_text="When the kept counts were last rebuilt (a rebuild is queued when stale)"
    )
    unlisted = serializers.IntegerField(
        help_text="Events stored since that rebuild whose tables are not listed yet (0: none left out)"
    )
    results = TableSerializer(many=True)


class RenameSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="`db.table`")
    since = UtcDateTimeField(help_text="When the table took (or gave up) that name (UTC)")


class TableHistorySerializer(EventPageSerializer):
    name = serializers.CharField(help_text="The table asked about")
    later_names = RenameSerializer(many=True, help_text="The names it was given later, followed forward")
    earlier_names = RenameSerializer(many=True, help_text="The names it had before (one step back)")

    class Meta:
        fields = ["name", "later_names", "earlier_names", "next", "results"]


class GapSerializer(serializers.ModelSerializer):
    started_at = UtcDateTimeField(
        read_only=True, allow_null=True, help_text="Last time recorded before it (UTC; null: unknown)"
    )
    ended_at = UtcDateTimeField(
        read_only=True, allow_null=True, help_text="First time recorded after it (UTC; null: still open)"
    )
    source = serializers.SerializerMethodField()

    class Meta:
        model = Gap
        fields = ["id", "server", "reason", "started_at", "ended_at", "detail", "source"]

    @extend_schema_field(GapPositionSerializer)
    def get_source(self, gap: Gap) -> dict:
        f = gap.source_file
        position = {"file": f.path, "line": gap.line, "offset": gap.byte_offset}
        return {"id": f.source_id, "name": f.source.name, **position}


class GapPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The following page, or null at the end")
    results = GapSerializer(many=True)
