"""Investigation-side records: API tokens, the tables seen, and cases with their evidence,
notes, saved filters and reports."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX_LEN = 8


def hash_token(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# The longest text a person may give a case: its description, a pin's note, an analyst's note
# (forms and the API refuse more). A report prints them whole, in the request or a worker.
MAX_CASE_TEXT = 20_000


class ApiToken(models.Model):
    """A REST API token. Only its SHA-256 is stored; the key is shown once, when made."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="default")
    prefix = models.CharField(max_length=TOKEN_PREFIX_LEN, help_text="First characters, to recognise a token")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # A read-only SIEM token reaches only events and alerts, whatever its user's role
    # (investigations.roles.SIEM_VIEWS, enforced by every API view's role permission).
    siem = models.BooleanField(default=False, help_text="Read-only: events and alerts only")

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_active(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


def api_token_create(
    *, user: models.Model, name: str = "default", expires_at: datetime | None = None, siem: bool = False
) -> tuple[ApiToken, str]:
    """Make a token for `user`; returns it with the key, which is not stored anywhere."""
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=key[:TOKEN_PREFIX_LEN],
        key_hash=hash_token(key),
        expires_at=expires_at,
        siem=siem,
    )
    return token, key


def api_token_revoke(token: ApiToken) -> bool:
    """Revoke it now; False when it was revoked already (the first revocation's time stays)."""
    now = timezone.now()
    revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
    if revoked:
        token.revoked_at = now
    return bool(revoked)


class TableSeen(models.Model):
    """A table name that events mention (`Event.tables`), with how often and when: the Tables page.

    Listing the names of millions of events takes a pass over all of them, so the list is kept
    here and rebuilt in the background (`investigations.query.tables.tables_seen_refresh`); names in
    events stored since the last rebuild are added on the fly by the page."""

    name = models.CharField(max_length=400, unique=True)
    events = models.BigIntegerField()
    destructive = models.BigIntegerField(help_text="Events that could remove or overwrite its data")
    first_at = models.DateTimeField(null=True)
    last_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return self.name


class TableCatalogue(models.Model):
    """The one row saying how far TableSeen is: events up to `upto_id` are counted in it."""

    upto_id = models.BigIntegerField(default=0)
    refreshed_at = models.DateTimeField(null=True)
    # A rebuild is claimed by one conditional UPDATE of this field (only one runs at a time).
    refreshing_since = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"tables seen up to event {self.upto_id}"


class Case(models.Model):
    """An investigation: what is being looked into, by whom, over which time, with its evidence.

    Only its investigators (and admins) change it; everyone with the investigator role reads it."""

    class Status(models.TextChoices):
        OPEN = "open", "open"
        CLOSED = "closed", "closed"

    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    investigators = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="cases", blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="cases_created"
    )
    # The time the investigation is about (e.g. "last night"): the report lists the log gaps in it.
    # Empty ends mean "from the first pinned event" / "to the last pinned event".
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"


class Evidence(models.Model):
    """An event pinned to a case, with the pinning analyst's note.

    Events live in a table partitioned by time whose ids come from one sequence, so `event_id`
    alone finds the row (the foreign key is not enforced by the database, as for every
    reference to events). The pin also keeps what the event was when pinned: its time (the
    partition key, so a look-up can be pruned to one partition) and its record hash (a hash of
    its server, time, position and raw bytes). A stored event that later differs from its pin,
    or is gone, is noticed by comparing the two (`manage.py verify_evidence`)."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="evidence")
    event = models.ForeignKey(
        "ingest.Event", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    event_occurred_at = models.DateTimeField(null=True, help_text="The event's time when pinned")
    event_record_hash = models.BinaryField(max_length=16, help_text="The event's record hash when pinned")
    note = models.TextField(blank=True)
    pinned_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    pinned_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["case", "event"], name="evidence_once_per_case")]
        # The timeline and the reports read a case's evidence in the events' order.
        indexes = [models.Index(fields=["case", "event_occurred_at"], name="evidence_by_case_time")]

    def __str__(self) -> str:
        return f"event {self.event_id} in case {self.case_id}"


class CaseNote(models.Model):
    """Free text an investigator writes into a case; timestamped and signed, never edited."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"note by {self.author_id} in case {self.case_id}"


class SavedFilter(models.Model):
    """A saved explorer search: its query string (`user=bob&table=shop.orders`), which reopens
    the explorer with the same filters at its own address (`/searches/<id>/`). It belongs to
    its creator, or to a case (saved from the case's page); `shared` lists it in everyone's
    explorer (the address opens for anyone with the role either way)."""

    case = models.ForeignKey(
        Case, on_delete=models.CASCADE, related_name="saved_filters", null=True, blank=True
    )
    name = models.CharField(max_length=200)
    query = models.TextField(help_text="The explorer's query string, without the leading ?")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    shared = models.BooleanField(default=False, help_text="Listed in everyone's explorer")

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return self.name


class Report(models.Model):
    """One generated report of a case (PDF, CSV or JSON), kept as a file under REPORT_DIR.

    Its SHA-256 and size are stored when it is written, so a copy handed to someone else can be
    checked against the store later (`manage.py verify_evidence --report FILE`). Large ones are
    generated in the background: `progress` counts evidence events written out of `total`."""

    class Format(models.TextChoices):
        PDF = "pdf", "PDF"
        CSV = "csv", "CSV"
        JSON = "json", "JSON"

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="reports")
    format = models.CharField(max_length=4, choices=Format.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.BigIntegerField(default=0, help_text="Evidence events written so far")
    total = models.BigIntegerField(default=0, help_text="Evidence events the report holds")
    # Relative to settings.REPORT_DIR; empty until the file is complete.
    file_name = models.CharField(max_length=300, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, help_text="Of the complete file, hex")
    size = models.BigIntegerField(null=True)
    generated_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True)
    generated_at = models.DateTimeField(null=True, help_text="When the file was complete")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at"]
        # verify_evidence --report FILE finds the report by the file's hash.
        indexes = [models.Index(fields=["sha256"], name="report_by_sha256")]

    def __str__(self) -> str:
        return f"{self.get_format_display()} report {self.pk} of case {self.case_id}"

    @property
    def path(self) -> Path | None:
        """The report file on disk, once written."""
        return Path(settings.REPORT_DIR) / self.file_name if self.file_name else None


from investigations.trail import AuditRecord  # noqa: E402, F401  (AuditWeb's own audit trail)
