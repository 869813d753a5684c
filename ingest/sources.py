"""Sources as the operator manages them: one form that validates a source (the Sources page, the
API and the admin use it), and the health of a source (the Sources page, the API, later a dashboard)."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.utils import timezone

from ingest.checkpoints import pattern_problem
from ingest.models import Event, Gap, IngestRun, Source
from ingest.mysql_table import password_env_problem


class SourceForm(forms.ModelForm):  # type: ignore[type-arg]
    """A file path or glob, or a live mysql.general_log table; uploads are made by uploading."""

    class Meta:
        model = Source
        fields = [
            "name",
            "kind",
            "path",
            "dsn",
            "password_env",
            "format",
            "server",
            "timezone",
            "interval_seconds",
            "quiet_seconds",
            "enabled",
        ]
        help_texts = {
            "path": "Absolute path or glob: /var/log/mysql/general.log* follows the log and its rotations",
            "dsn": "mysql://USER@HOST:PORT (no password: the worker reads it from the variable below)",
        }

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # An upload is made by uploading a file, not by naming one.
        self.fields["kind"].choices = [
            (Source.Kind.FILE.value, "Log file(s) on the worker's disk"),
            (Source.Kind.MYSQL_TABLE.value, Source.Kind.MYSQL_TABLE.label),
        ]

    def clean_timezone(self) -> str:
        zone = self.cleaned_data["timezone"]
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(f"{zone!r} is not a time zone (e.g. UTC, Europe/Berlin).") from None
        return str(zone)

    def clean_dsn(self) -> str:
        dsn = self.cleaned_data["dsn"].strip()
        if dsn:
            parts = urlsplit(dsn)
            if parts.scheme != "mysql" or not parts.hostname:
                raise forms.ValidationError("Give mysql://USER@HOST[:PORT].")
            if parts.password:
                raise forms.ValidationError(
                    "No password in the DSN: it would be stored. Put it in the worker's environment "
                    "variable named below."
                )
        return str(dsn)

    def clean_password_env(self) -> str:
        name = str(self.cleaned_data["password_env"]).strip()
        problem = password_env_problem(name)
        if problem is not None:
            raise forms.ValidationError(problem)
        return name

    def clean_interval_seconds(self) -> int:
        value = int(self.cleaned_data["interval_seconds"])
        if value < 1:
            raise forms.ValidationError("At least 1 second.")
        return value

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        kind = data.get("kind")
        if kind == Source.Kind.FILE:
            problem = pattern_problem(str(data.get("path") or ""))
            if problem is not None:
                self.add_error("path", problem)
        elif kind == Source.Kind.MYSQL_TABLE and not data.get("dsn"):
            self.add_error("dsn", "Give the DSN of the server whose mysql.general_log to pull.")
        return data


@dataclass
class Health:
    """How a source is doing: `state` is ok, unhealthy, waiting (never read yet) or off."""

    state: str
    reasons: list[str] = field(default_factory=list)
    # What kind of trouble each reason is, without its figures: vanished, unreadable, refused
    # (the last poll's error), failed, silent. An alert is raised when these change.
    kinds: list[str] = field(default_factory=list)
    # The statement that switched logging off, when the logs read show it (an Event id).
    logging_off_event: int | None = None

    @property
    def ok(self) -> bool:
        return self.state in ("ok", "waiting", "off")

    def as_dict(self) -> dict[str, object]:
        return {"state": self.state, "reasons": self.reasons, "logging_off_event": self.logging_off_event}


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _logging_off_event(source: Source) -> int | None:
    """The event that switched logging off, when the last thing read from the source was one.

    The gap finder keeps it (time, line, offset, statement) until a record follows; a Gap row
    of this server left open says the same for files read to their end."""
    off = (source.checkpoint or {}).get("gaps", {}).get("off")
    events = Event.objects.filter(server=source.server, flags__contains=["anti_forensic"])
    if off:
        when = datetime.fromisoformat(off[0]) if off[0] else None
        found = events.filter(occurred_at=when, line=off[1], byte_offset=off[2]).values_list("pk", flat=True)
        return next(iter(found), None)
    gap = Gap.objects.filter(server=source.server, reason=Gap.Reason.LOGGING_OFF, ended_at=None).last()
    if gap is None:
        return None
    found = events.filter(
        occurred_at=gap.started_at, source_file=gap.source_file_id, byte_offset=gap.byte_offset
    ).values_list("pk", flat=True)
    return next(iter(found), None)


def source_health(source: Source, now: datetime | None = None) -> Health:
    """Why a source needs attention, if it does: its file gone or unreadable, its database refusing
    the connection, the last run failing, or no new data for longer than its quiet time (linked to
    the statement that switched logging off when the logs show one)."""
    now = now or timezone.now()
    if not source.enabled and source.kind != Source.Kind.UPLOAD:  # an upload is read once, never polled
        return Health("off")
    reasons: list[str] = []
    kinds: list[str] = []
    if source.kind == Source.Kind.FILE:
        matches = glob.glob(source.path)
        if not matches:
            reasons.append(f"the file vanished: nothing matches {source.path}")
            kinds.append("vanished")
        unreadable = [m for m in matches if os.path.isfile(m) and not os.access(m, os.R_OK)]
        if unreadable:
            reasons.append(f"permission denied reading {', '.join(unreadable[:3])}")
            kinds.append("unreadable")
    if source.last_error and source.last_error not in " ".join(reasons):
        reasons.append(source.last_error)
        kinds.append("refused")
    last_run = source.runs.exclude(status=IngestRun.Status.QUEUED).order_by("-started_at").first()
    failed = last_run is not None and last_run.status == IngestRun.Status.FAILED
    if failed and not source.last_error and not last_run.error.startswith("interrupted"):  # type: ignore[union-attr]
        reasons.append(f"the last run failed: {last_run.error}")  # type: ignore[union-attr]
        kinds.append("failed")
    off_event = None
    if source.kind != Source.Kind.UPLOAD:
        since = source.last_data_at or source.created_at
        silent = (now - since).total_seconds()
        if silent > source.quiet_seconds:
            what = "no new data" if source.last_data_at else "no data yet"
            reason = f"{what} for {_ago(silent)} (expected within {_ago(source.quiet_seconds)})"
            off_event = _logging_off_event(source)
            if off_event is not None:
                reason += ": logging was switched off (see the statement that did it)"
            reasons.append(reason)
            kinds.append("silent: logging off" if off_event is not None else "silent")
    if reasons:
        return Health("unhealthy", reasons, kinds, off_event)
    if source.last_polled_at is None and source.kind != Source.Kind.UPLOAD:
        return Health("waiting")
    return Health("ok")


def check_sources_health(sources: Iterable[Source] | None = None) -> int:
    """Look at each source's health and raise an alert where it changed; returns how many."""
    from ingest.alerts import note_source_health

    raised = 0
    for source in sources if sources is not None else Source.objects.all():
        health = source_health(source)
        if note_source_health(source, health.state, health.reasons, health.kinds):
            raised += 1
    return raised
