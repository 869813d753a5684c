"""Sources as the operator manages them: one form that validates a source (the Sources page, the
API and the admin use it), and the facts the health model judges (ingest.health) gathered from
the store, for the dashboard, the Sources pages, the API and the alerts alike."""

from __future__ import annotations

import dataclasses
import glob
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.conf import settings
from django.db import models
from django.utils import timezone

from ingest import health
from ingest.alerts import note_source_health
from ingest.checkpoints import pattern_problem
from ingest.models import Event, Gap, IngestRun, Source
from ingest.mysql_table import password_env_problem
from ingest.parsers import AUTO
from ingest.parsers.pgaudit_stderr import NAME as PGAUDIT_STDERR
from ingest.parsers.pgaudit_stderr import prefix_problem

DELIVERY_HISTORY = timedelta(days=30)  # how far back deliveries teach a source's rhythm
DELIVERY_RUNS = 1000  # and among how many of its newest runs
ACTIVE = (IngestRun.Status.QUEUED, IngestRun.Status.RUNNING)


def time_zone(zone: str) -> str:
    """A form's time zone field, checked: the zone of the times a log prints without one."""
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise forms.ValidationError(f"{zone!r} is not a time zone (e.g. UTC, Europe/Berlin).") from None
    return str(zone)


class SourceForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs, not in Django
    """A file path or glob (logs, or binlog files), a live mysql.general_log table, or the binary
    log pulled as a replica; uploads are made by uploading."""

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
            "log_line_prefix",
            "interval_seconds",
            "quiet_seconds",
            "enabled",
        ]
        help_texts = {
            "path": "Absolute path or glob: /var/log/mysql/general.log* follows the log and its rotations; "
            "binary logs: /var/lib/mysql/mariadb-bin.[0-9]* with the format binlog",
            "dsn": "mysql://USER@HOST:PORT (no password: the worker reads it from the variable below); "
            "a live general_log table, or the binary log pulled as a replica; "
            "oracle://USER@HOST:PORT/SERVICE: Oracle's unified audit trail",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # An upload is made by uploading a file, not by naming one.
        self.fields["kind"].choices = [
            (Source.Kind.FILE.value, "Log file(s) on the worker's disk"),
            (Source.Kind.MYSQL_TABLE.value, Source.Kind.MYSQL_TABLE.label),
            (Source.Kind.BINLOG_REPLICA.value, "Binary log pulled from the server as a replica"),
            (Source.Kind.ORACLE_TABLE.value, Source.Kind.ORACLE_TABLE.label),
        ]
        # A prefix's spaces are the server's separators (its usual last character is one).
        self.fields["log_line_prefix"].strip = False

    def clean_timezone(self) -> str:
        return time_zone(self.cleaned_data["timezone"])

    def clean_dsn(self) -> str:
        dsn = self.cleaned_data["dsn"].strip()
        if dsn:
            parts = urlsplit(dsn)
            if parts.scheme not in ("mysql", "oracle") or not parts.hostname:
                raise forms.ValidationError(
                    "Give mysql://USER@HOST[:PORT] or oracle://USER@HOST[:PORT]/SERVICE."
                )
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

    def clean_log_line_prefix(self) -> str:
        prefix = str(self.cleaned_data["log_line_prefix"])
        problem = prefix_problem(prefix) if prefix else None
        if problem is not None:
            raise forms.ValidationError(problem)
        return prefix

    def clean_interval_seconds(self) -> int:
        value = int(self.cleaned_data["interval_seconds"])
        if value < 1:
            raise forms.ValidationError("At least 1 second.")
        return value

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        kind = data.get("kind")
        if data.get("log_line_prefix"):
            # Only a stderr log is read through it; with "auto" the prefix says which format it is
            # (a log in an unknown prefix cannot be told from its bytes).
            if data.get("format") == AUTO:
                data["format"] = PGAUDIT_STDERR
            elif data.get("format") != PGAUDIT_STDERR:
                self.add_error(
                    "log_line_prefix", f"Only a {PGAUDIT_STDERR} source is read through a log_line_prefix."
                )
        if kind == Source.Kind.FILE:
            problem = pattern_problem(str(data.get("path") or ""))
            if problem is not None:
                self.add_error("path", problem)
        elif kind == Source.Kind.MYSQL_TABLE and not data.get("dsn"):
            self.add_error("dsn", "Give the DSN of the server whose mysql.general_log to pull.")
        elif kind == Source.Kind.BINLOG_REPLICA:
            if not data.get("dsn"):
                self.add_error("dsn", "Give the DSN of the server whose binary log to pull.")
            data["format"] = "binlog"  # what it pulls is binlog files, whatever was chosen
        elif kind == Source.Kind.ORACLE_TABLE:
            dsn = str(data.get("dsn") or "")
            if not dsn.startswith("oracle://") or not urlsplit(dsn).path.strip("/"):
                self.add_error(
                    "dsn", "Give oracle://USER@HOST[:PORT]/SERVICE of the database whose trail to pull."
                )
        return data


@dataclass
class Health:
    """How a source is doing, as every page, the API and the alerts show it (ingest.health).

    `state` is alive, suspect, dead, failed, waiting, finished or off; `reason` says why in a
    sentence; `legacy` is the coarse ok/unhealthy/waiting/off the API's `health.state` and the
    alerts have always used, with `reasons` and `kinds` the troubles behind an unhealthy one."""

    state: str
    reason: str = ""
    reasons: list[str] = field(default_factory=list)
    # What kind of trouble each reason is, without its figures: vanished, unreadable, refused
    # (the last poll's error), failed, silent. An alert is raised when these change.
    kinds: list[str] = field(default_factory=list)
    # The statement that switched logging off, when the logs read show it (an Event id).
    logging_off_event: int | None = None
    last_data_at: datetime | None = None  # when the source last delivered new bytes or rows
    expected_seconds: float | None = None  # the learned gap between deliveries
    suspect_after: float | None = None
    dead_after: float | None = None

    @property
    def legacy(self) -> str:
        return health.LEGACY[self.state]

    @property
    def ok(self) -> bool:
        return self.legacy != "unhealthy"

    @property
    def needs_attention(self) -> bool:
        return self.state in health.ATTENTION

    def as_dict(self) -> dict[str, object]:
        """The API's `health` object, as it always was."""
        reasons = self.reasons if self.legacy == "unhealthy" else []
        return {"state": self.legacy, "reasons": reasons, "logging_off_event": self.logging_off_event}


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


def _troubles(source: Source, last_run: IngestRun | None) -> list[health.Trouble]:
    """Why the source cannot be read now: its files gone or unreadable, its database refusing the
    connection (the last poll's error), or its last run failing."""
    troubles: list[health.Trouble] = []
    if source.kind == Source.Kind.FILE and source.enabled:
        matches = glob.glob(source.path)
        if not matches:
            troubles.append(health.Trouble("vanished", f"the file vanished: nothing matches {source.path}"))
        unreadable = [m for m in matches if os.path.isfile(m) and not os.access(m, os.R_OK)]
        if unreadable:
            reason = f"permission denied reading {', '.join(unreadable[:3])}"
            troubles.append(health.Trouble("unreadable", reason))
    if source.last_error and source.enabled and source.last_error not in " ".join(t.reason for t in troubles):
        troubles.append(health.Trouble("refused", source.last_error))
    if (
        last_run is not None
        and last_run.status == IngestRun.Status.FAILED
        and not source.last_error
        and not last_run.error.startswith("interrupted")
    ):
        troubles.append(health.Trouble("failed", f"the last run failed: {last_run.error}"))
    return troubles


def _read_to_end(source: Source, last_run: IngestRun | None) -> bool:
    """Whether a source read once has every file read to its end, by a run that ended well.

    A file given to `manage.py ingest` before it recorded `finished` counts when its SHA-256 was
    recorded: that happens only once the whole file was read."""
    live = source.pulls_rows or source.kind == Source.Kind.BINLOG_REPLICA
    if live or last_run is None or last_run.status != IngestRun.Status.DONE:
        return False
    files = source.files.values_list("finished", "device", "sha256")
    return bool(files) and all(done or (device is None and sha) for done, device, sha in files)


def source_health(source: Source, now: datetime | None = None) -> Health:
    """The source's state and why, from what the store knows (ingest.health judges)."""
    now = now or timezone.now()
    runs = source.runs.order_by("-started_at")
    last_run = runs.exclude(status=IngestRun.Status.QUEUED).first()
    # Deliveries: runs that read new bytes (rows, for a table), newest first, among its newest
    # DELIVERY_RUNS runs of the last DELIVERY_HISTORY: a table polled every minute for a month has
    # 43,200 runs, nearly all empty, and walking them all would cost every page (bench/health_bench.py).
    recent = runs.filter(finished_at__gte=now - DELIVERY_HISTORY).values("pk")[:DELIVERY_RUNS]
    delivered = IngestRun.objects.filter(
        pk__in=models.Subquery(recent), bytes_read__gt=0, status=IngestRun.Status.DONE
    ).order_by("-started_at")
    deliveries = list(delivered.values_list("finished_at", flat=True)[: health.MAX_GAPS + 1])
    # The pipeline keeps last_data_at; a source read before `manage.py ingest` kept it has its runs.
    last = source.last_data_at or next(iter(deliveries), None)
    upload = source.kind == Source.Kind.UPLOAD
    followed = source.enabled and not upload
    facts = health.Facts(
        now=now,
        followed=followed,
        upload=upload,
        created_at=source.created_at,
        last_delivery=last,
        deliveries=deliveries,
        floor=float(max(settings.HEALTH_MIN_SUSPECT_SECONDS, 2 * source.interval_seconds)),
        ceiling=float(source.quiet_seconds),
        troubles=_troubles(source, last_run),
        reading=not followed and runs.filter(status__in=ACTIVE).exists(),
        read_to_end=not followed and _read_to_end(source, last_run),
    )
    verdict = health.judge(facts)
    off_event = None
    expectation = verdict.expectation
    if expectation is not None and (verdict.silent_for or 0) > expectation.suspect_after:
        off_event = _logging_off_event(source)  # the silence may have a cause the logs show
        if off_event is not None:
            verdict = health.judge(dataclasses.replace(facts, logging_off=True))
    return Health(
        state=verdict.state,
        reason=verdict.reason,
        reasons=list(verdict.details),
        kinds=list(verdict.kinds),
        logging_off_event=off_event,
        last_data_at=last,
        expected_seconds=expectation.every if expectation else None,
        suspect_after=expectation.suspect_after if expectation else None,
        dead_after=expectation.dead_after if expectation else None,
    )


def source_state_counts(healths: Iterable[Health]) -> list[tuple[str, int]]:
    """How many sources are in each state, in the model's order of states (none left out as 0)."""
    counts = Counter(h.state for h in healths)
    return [(state, counts[state]) for state in health.STATES if counts[state]]


def check_sources_health(sources: Iterable[Source] | None = None) -> int:
    """Look at each source's health and raise an alert where it changed; returns how many."""
    raised = 0
    for source in sources if sources is not None else Source.objects.all():
        looked = source_health(source)
        if note_source_health(source, looked.legacy, looked.reasons, looked.kinds):
            raised += 1
    return raised
