"""Where ingested logs and their events live.

Source -> SourceFile -> IngestRun -> ParseProblem describe what was read and how;
Session and Event hold what the logs say. Event is a time-partitioned table
(see migration 0002): Django sees it as an ordinary model.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models.functions import Now
from django.utils import timezone

from ingest.chunks import RawReader
from ingest.mysql_table import PASSWORD_ENV_DEFAULT
from ingest.parsers import AUTO, format_choices
from ingest.textsafe import CheckpointDecoder, CheckpointEncoder, storable


class Source(models.Model):
    """Something AuditWeb reads from: a file path or glob, a table, or an upload."""

    class Kind(models.TextChoices):
        FILE = "file"
        MYSQL_TABLE = "mysql-table", "mysql.general_log table"
        ORACLE_TABLE = "oracle-table", "Oracle UNIFIED_AUDIT_TRAIL"
        UPLOAD = "upload"
        # The binary log pulled from the server as a replica (ingest.binlog_replica).
        BINLOG_REPLICA = "binlog-replica", "binary log pulled as a replica"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.FILE)
    path = models.CharField(max_length=1000, blank=True)
    dsn = models.CharField(max_length=1000, blank=True)
    # The formats are the parsers' registry's (a callable: a new format needs no migration).
    format = models.CharField(max_length=20, choices=format_choices, default=AUTO)
    server = models.CharField(max_length=200, help_text="Label of the database server the log belongs to")
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="Zone of timestamps the log prints without one"
    )
    log_line_prefix = models.CharField(
        max_length=200,
        blank=True,
        help_text=(
            "PostgreSQL stderr logs only: the server's log_line_prefix, exactly as postgresql.conf"
            " sets it (empty: one of the prefixes AuditWeb knows)"
        ),
    )
    interval_seconds = models.PositiveIntegerField(default=60)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Where the next incremental read starts: a live table's watermark, and for every kind the
    # session tracker's and the gap finder's state (files keep their own offsets, SourceFile.resume).
    # Written in the same transaction as the events it covers.
    # Any text a log holds (NUL too: ingest.textsafe codes what jsonb refuses, and decodes it back).
    checkpoint = models.JSONField(
        default=dict, blank=True, encoder=CheckpointEncoder, decoder=CheckpointDecoder
    )
    # A live table's password is never stored: the name of the environment variable holding it,
    # which must start with AUDITWEB_SOURCE_ (ingest.mysql_table.source_password).
    password_env = models.CharField(
        max_length=100,
        blank=True,
        default=PASSWORD_ENV_DEFAULT,
        help_text="Environment variable of the worker that holds the database password "
        "(its name starts with AUDITWEB_SOURCE_)",
    )
    quiet_seconds = models.PositiveIntegerField(
        default=3600, help_text="Longest the log may stay silent before the source is flagged"
    )
    # Beat claims a due source by moving this forward with one conditional UPDATE.
    next_poll_at = models.DateTimeField(null=True, blank=True)
    last_polled_at = models.DateTimeField(null=True, blank=True)
    last_data_at = models.DateTimeField(null=True, blank=True, help_text="When new bytes or rows last came")
    last_error = models.TextField(blank=True, help_text="Why the last poll could not read (empty: it could)")
    # The troubles last reported in an alert (empty: healthy), so a lasting trouble is one alert.
    health_alerted = models.CharField(max_length=200, blank=True, default="")

    def __str__(self) -> str:
        return self.name

    @property
    def pulls_rows(self) -> bool:
        """Whether this source pulls rows of a live table (its runs count rows, not bytes)."""
        return self.kind in (Source.Kind.MYSQL_TABLE, Source.Kind.ORACLE_TABLE)


class SourceFile(models.Model):
    """One file as it was read: identity, size and hashes, kept as evidence."""

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="files")
    path = models.CharField(max_length=1000)
    compressed = models.BooleanField(default=False)
    size = models.BigIntegerField(help_text="Bytes on disk when last read")
    # SHA-256 of the first 64 KiB (decompressed): recognises the same file under another name.
    head_sha256 = models.CharField(max_length=64)
    # SHA-256 of the file's content (decompressed for .gz) from its first byte to `hashed_bytes`:
    # the bytes read so far, final once the file has been read to its end (ingest.custody).
    sha256 = models.CharField(max_length=64, blank=True)
    bytes_read = models.BigIntegerField(default=0)
    hashed_bytes = models.BigIntegerField(default=0, help_text="Content bytes the SHA-256 covers")
    # The SHA-256 computation after `hashed_bytes`, saved (ingest.custody.Sha256State), so that
    # the next poll of a growing file hashes only the new bytes.
    hash_state = models.BinaryField(null=True, editable=False)
    # An upload's SHA-256 as it arrived (the bytes on disk: compressed for a .gz upload).
    received_sha256 = models.CharField(max_length=64, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_read_at = models.DateTimeField(null=True)
    # Files followed by a source (ingest.checkpoints): who the file is on disk, and where the
    # next read starts. head_length > 0 says head_sha256 covers only that many first bytes.
    device = models.BigIntegerField(null=True, blank=True)
    inode = models.BigIntegerField(null=True, blank=True)
    head_length = models.IntegerField(default=0)
    # {"offset": byte offset, "line": its number, "last_time": time carried forward or null}
    resume = models.JSONField(default=dict, blank=True)
    finished = models.BooleanField(default=False, help_text="Read to its end; nothing more will come")
    # Exactly once without a per-row index (issue 22, ingest.identity): the SHA-256 of the first
    # CONTENT_HEAD_BYTES of the content (decompressed; the whole content when shorter), which
    # finds the earlier reads of the same bytes under any name, and how far this file's events
    # are stored: every event that starts before `stored_below` is in the store (under this file
    # or one whose content this file's begins with).
    content_head = models.CharField(max_length=64, blank=True, db_default="")
    stored_below = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "path", "head_sha256"], name="sourcefile_identity"),
        ]
        indexes = [
            # The earlier reads of a file's content: one row per file read, not per event.
            models.Index(fields=["content_head"], name="sourcefile_content_head"),
        ]

    def __str__(self) -> str:
        return self.path


def error_text(error: BaseException | str) -> str:
    """An error as a run or a source shows it (bounded; no byte PostgreSQL refuses)."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return storable(text)[:2000]


class IngestRunQuerySet(models.QuerySet["IngestRun"]):
    """Ending runs: each a conditional UPDATE of the running ones, so no ending is overwritten."""

    def finish(self) -> dict[str, object] | None:
        """End these runs, where running, as done; the fields they got (None: none was running)."""
        ended = {"status": IngestRun.Status.DONE, "finished_at": timezone.now()}
        return ended if self.filter(status=IngestRun.Status.RUNNING).update(**ended) else None

    def fail(self, error: BaseException | str) -> dict[str, object] | None:
        """End these runs, where running, as failed on `error`; the fields they got (None: none was)."""
        ended = {"status": IngestRun.Status.FAILED, "error": error_text(error), "finished_at": timezone.now()}
        return ended if self.filter(status=IngestRun.Status.RUNNING).update(**ended) else None


class IngestRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="runs")
    source_file = models.ForeignKey(SourceFile, on_delete=models.SET_NULL, null=True, related_name="runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True)
    bytes_read = models.BigIntegerField(default=0)
    bytes_total = models.BigIntegerField(default=0)
    events_seen = models.BigIntegerField(default=0)
    events_stored = models.BigIntegerField(default=0)
    problems = models.IntegerField(default=0)
    error = models.TextField(blank=True)

    objects = IngestRunQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["source", "-started_at"], name="run_history")]  # runs of a source

    def __str__(self) -> str:
        return f"run {self.pk} of {self.source_id} ({self.status})"

    def begin(self, bytes_total: int) -> None:
        """A queued run (or one asked for again) starts now, with this many bytes to read."""
        self.status, self.bytes_total, self.started_at = self.Status.RUNNING, bytes_total, timezone.now()
        self.save(update_fields=["status", "bytes_total", "started_at"])

    def add_batch(
        self, *, read: int, seen: int, stored: int, problems: int, source_file: SourceFile | None = None
    ) -> None:
        """Count a committed batch (inside its transaction). Added in SQL: the ranges of a split
        share one run, and their workers commit batches at the same time."""
        fields: dict[str, object] = {
            "bytes_read": models.F("bytes_read") + read,
            "events_seen": models.F("events_seen") + seen,
            "events_stored": models.F("events_stored") + stored,
            "problems": models.F("problems") + problems,
        }
        if source_file is not None:
            fields["source_file"] = self.source_file = source_file
        IngestRun.objects.filter(pk=self.pk).update(**fields)
        self.bytes_read += read
        self.events_seen += seen
        self.events_stored += stored
        self.problems += problems

    def finish(self) -> None:
        """The run ended well (if it is still running: a split's last range and a poll may both try)."""
        self._end(IngestRun.objects.filter(pk=self.pk).finish())

    def fail(self, error: BaseException | str) -> None:
        """The run ended on `error` (if it is still running), which is kept for the operator."""
        self._end(IngestRun.objects.filter(pk=self.pk).fail(error))

    def _end(self, ended: dict[str, object] | None) -> None:
        for name, value in (ended or {}).items():
            setattr(self, name, value)

    @property
    def seconds(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    @property
    def rate(self) -> float | None:
        """Bytes (rows, for a table) read per second so far."""
        end = self.finished_at or timezone.now()
        elapsed = (end - self.started_at).total_seconds()
        return self.bytes_read / elapsed if elapsed > 0 and self.bytes_read else None

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the rate so far, while running."""
        rate = self.rate
        if self.status != self.Status.RUNNING or not rate or self.bytes_total <= self.bytes_read:
            return None
        return (self.bytes_total - self.bytes_read) / rate

    @property
    def percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        if self.bytes_total <= 0:
            return 0
        return min(100, int(100 * self.bytes_read / self.bytes_total))


class ParseProblem(models.Model):
    """Bytes that could not be read as a record: kept with their position, never dropped."""

    run = models.ForeignKey(IngestRun, on_delete=models.CASCADE, related_name="problem_set")
    source_file = models.ForeignKey(SourceFile, on_delete=models.CASCADE, related_name="problems")
    line = models.BigIntegerField()
    offset = models.BigIntegerField()
    reason = models.CharField(max_length=500)
    excerpt = models.BinaryField()  # at most records.PROBLEM_EXCERPT_BYTES

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source_file", "offset"], name="problem_once_per_position"),
        ]

    def __str__(self) -> str:
        return f"line {self.line} (offset {self.offset}): {self.reason}"

    @property
    def excerpt_text(self) -> str:
        return bytes(self.excerpt).decode("utf-8", "replace")


class Session(models.Model):
    """One connection of one server boot: (server, boot, connection id)."""

    key = models.CharField(max_length=400, unique=True)  # "server/boot/connection id"
    server = models.CharField(max_length=200)
    boot = models.CharField(max_length=64)
    connection_id = models.BigIntegerField(null=True)
    user = models.CharField(max_length=200, null=True)
    host = models.CharField(max_length=300, null=True)
    ip = models.CharField(max_length=64, null=True)
    program = models.CharField(max_length=200, null=True, help_text="Client program, where the log names it")
    os_user = models.CharField(max_length=200, null=True, help_text="Client's operating-system user")
    database = models.CharField(max_length=200, null=True, help_text="Database when the session began")
    started_at = models.DateTimeField(null=True)
    ended_at = models.DateTimeField(null=True)
    attributed = models.BooleanField(default=False)
    # A change of user ends one session and starts the next on the same connection: the run of
    # the account before it (its key ends in "~2", "~3"... after the first).
    previous = models.ForeignKey(
        "self", on_delete=models.DO_NOTHING, db_constraint=False, null=True, related_name="next_sessions"
    )
    # The record that named the session's account (its Connect or Change user): the event page
    # links to it as the proof of who ran a statement. Its identity in the store, as alerts keep it.
    opened_time = models.DateTimeField(null=True)
    opened_hash = models.BinaryField(max_length=16, null=True)

    class Meta:
        indexes = [models.Index(fields=["server", "connection_id"], name="session_by_connection")]

    def __str__(self) -> str:
        return self.key


class Statement(models.Model):
    """One distinct statement, stored once however many events ran it (issue 22): what follows
    from its text and context (the current database, the server's dialect). Events point to it.

    `key` is a digest of every value below (ingest.rows.statement_key, and the SQL function
    ingest_statement_key of migration 0025): two events share a statement only when all of them
    are equal. `id` is the key's first 8 bytes (or the next of the key's ids, statement_id(key,
    attempt), should those be another key's), so the parsing process knows it without asking the
    database, and a statement is found by its id alone: the key has no index."""

    id = models.BigIntegerField(primary_key=True)
    key = models.BinaryField(max_length=16)
    database = models.CharField(max_length=200, null=True)
    statement_type = models.CharField(max_length=60, blank=True)
    tables = ArrayField(models.CharField(max_length=400), default=list)
    destructive = models.BooleanField(default=False)
    fingerprint = models.TextField(blank=True)
    sql = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.statement_type or '-'} {self.sql[:60]}"


class EventRow(models.Model):
    """The physical event table, `ingest_event_row`, partitioned by month of occurred_at: one
    narrow row per event (time, who, command, flags, status, position, raw bytes) and its
    statement's id. Its columns, indexes and partitions are declared in SQL (migration 0025,
    ingest.partitions); the store writes it with COPY, and pages read events through `Event`."""

    id = models.BigAutoField(primary_key=True)

    class Meta:
        db_table = "ingest_event_row"

    def __str__(self) -> str:
        return f"event row {self.pk}"


class Event(models.Model):
    """One statement or connection event, normalized: the view `ingest_event`, which joins each
    narrow row of `ingest_event_row` (EventRow) to its statement (Statement), with the columns
    of one wide row (migration 0025). Writable through the view's triggers; the store writes the
    narrow table itself.

    Ids come from the event rows' sequence, so `id` alone is unique. Foreign keys are not
    enforced by the database (db_constraint=False): COPY would check each row, and the store
    writer creates the rows they point to first.
    """

    id = models.BigAutoField(primary_key=True)
    occurred_at = models.DateTimeField(null=True)  # NULL: the log never said when (default partition)
    server = models.CharField(max_length=200)
    session = models.ForeignKey(
        Session, on_delete=models.DO_NOTHING, db_constraint=False, related_name="events"
    )
    connection_id = models.BigIntegerField(null=True)
    user = models.CharField(max_length=200, null=True)
    host = models.CharField(max_length=300, null=True)
    ip = models.CharField(max_length=64, null=True)
    database = models.CharField(max_length=200, null=True)
    command = models.CharField(max_length=40)
    statement_type = models.CharField(max_length=60, blank=True)
    tables = ArrayField(models.CharField(max_length=400), default=list)
    destructive = models.BooleanField(default=False)
    flags = ArrayField(models.CharField(max_length=40), default=list)
    sql = models.TextField(blank=True)
    fingerprint = models.TextField(blank=True)
    rows_affected = models.BigIntegerField(null=True)
    status = models.CharField(max_length=40, null=True)
    # The raw bytes are kept inline only for events whose bytes are no slice of a file's content
    # (live table rows, binary logs, records assembled or cut); the others' are `raw_length` bytes
    # at `byte_offset` in their file's chunks (RawChunk, ingest.chunks). `raw` reads either.
    raw_inline = models.BinaryField(null=True, db_column="raw")
    raw_length = models.IntegerField(null=True)
    source_file = models.ForeignKey(SourceFile, on_delete=models.DO_NOTHING, db_constraint=False)
    line = models.BigIntegerField()
    byte_offset = models.BigIntegerField()
    record_hash = models.BinaryField(max_length=16)
    ingest_run = models.ForeignKey(IngestRun, on_delete=models.DO_NOTHING, db_constraint=False, null=True)
    # How the account is known (Attribution); "" for events stored before this was recorded.
    attribution = models.CharField(max_length=24, blank=True, default="", db_default="")
    # The account a SQL SECURITY DEFINER routine runs its body as, on a CALL of one and on the
    # statements run inside it (the caller stays `user`).
    definer = models.CharField(max_length=300, null=True, blank=True)
    # The statement the sql ... fingerprint columns come from (set by the view's trigger on writes).
    statement = models.ForeignKey(
        Statement, on_delete=models.DO_NOTHING, db_constraint=False, null=True, related_name="+"
    )

    class Attribution(models.TextChoices):
        RECORD = "record", "the record itself names the account"
        CONNECT = "connect", "the connection's Connect or Change user, in the same file"
        CONNECT_EARLIER_FILE = "connect_earlier_file", "the connection's Connect, in an earlier file"
        INFERRED_REOPEN = "inferred_reopen", "inferred across a log reopening the log cannot prove"
        UNATTRIBUTED = "unattributed", "unknown: the connection began before the log"

    class Meta:
        # A view (migration 0025); its tables' indexes are declared there, each with its query.
        managed = False

    def __str__(self) -> str:
        return f"{self.occurred_at} {self.user}@{self.host} {self.statement_type or self.command}"

    @property
    def raw(self) -> bytes:
        """The event's exact raw bytes: inline, or its slice of the file's chunks (read once)."""
        cached = self.__dict__.get("_raw")
        if cached is None:
            if self.raw_inline is not None:
                cached = bytes(self.raw_inline)
            else:
                cached = RawReader().read(self.source_file_id, self.byte_offset, self.raw_length or 0)
            self.__dict__["_raw"] = cached
        return cached

    @property
    def raw_text(self) -> str:
        return self.raw.decode("utf-8", "backslashreplace")


class RawChunk(models.Model):
    """Up to ingest.chunks.CHUNK_BYTES of a file's content, zstd-compressed, from offset `start`:
    the log's bytes as read, in order, which events point into (offset and length)."""

    id = models.BigAutoField(primary_key=True)
    source_file = models.ForeignKey(
        SourceFile, on_delete=models.DO_NOTHING, db_constraint=False, related_name="raw_chunks"
    )
    start = models.BigIntegerField()  # content offset of its first byte
    length = models.IntegerField()  # content bytes it holds
    sha256 = models.BinaryField(max_length=32)  # of the content
    data = models.BinaryField()  # zstd

    class Meta:
        constraints = [
            # Each read's chunks at their offsets, once: also the lookup of an event's bytes
            # (source_file, start between its offset - CHUNK_BYTES and its end).
            models.UniqueConstraint(fields=["source_file", "start"], name="raw_chunk_once"),
        ]

    def __str__(self) -> str:
        return f"file #{self.source_file_id} bytes {self.start}-{self.start + self.length - 1}"


class Gap(models.Model):
    """Time the log itself shows was not recorded: logging switched off, a restart, the clock
    going back. "The absence of evidence is not evidence of absence" is shown for these."""

    class Reason(models.TextChoices):
        LOGGING_OFF = "logging_off", "logging switched off"
        LOG_OPENED = "log_opened", "log (re)opened: restart or logging switched on"
        LOG_REOPENED = "log_reopened", "log reopened, same server boot"
        RESTART = "restart", "server restart"
        TIME_BACKWARDS = "time_backwards", "clock went backwards"
        SEQUENCE = "sequence", "records missing: the log's own counter jumped"
        PURGED = "purged", "audit records purged from the trail"

    server = models.CharField(max_length=200)
    reason = models.CharField(max_length=20, choices=Reason.choices)
    started_at = models.DateTimeField(null=True, help_text="Last time recorded before it")
    ended_at = models.DateTimeField(null=True, help_text="First time recorded after it; empty while open")
    detail = models.CharField(max_length=1000, help_text="What shows it: the evidence, in words")
    source_file = models.ForeignKey(SourceFile, on_delete=models.CASCADE, related_name="gaps")
    line = models.BigIntegerField(help_text="Line of the record that shows it")
    byte_offset = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source_file", "byte_offset", "reason"], name="gap_once"),
        ]
        indexes = [models.Index(fields=["server", "started_at"], name="gap_by_time")]

    def __str__(self) -> str:
        return f"{self.server}: {self.get_reason_display()} from {self.started_at} to {self.ended_at}"


class Alert(models.Model):
    """What a SIEM is told: a destructive, anti-forensic or privilege-changing event, or a source
    that became unhealthy. Served in the order it became visible (see `ingest.alerts`)."""

    class Kind(models.TextChoices):
        ANTI_FORENSIC = "anti_forensic", "anti-forensic statement"
        PRIVILEGE_CHANGE = "privilege_change", "privilege change"
        DESTRUCTIVE = "destructive", "destructive statement"
        SOURCE_HEALTH = "source_health", "source unhealthy"

    # The feed's order and cursor, numbered by the database. A statement trigger (migration 0010)
    # first takes a lock that the transaction holds until it ends: a later number always
    # belongs to a transaction that committed later, so alerts become visible in this order.
    position = models.BigIntegerField(
        unique=True,
        editable=False,
        db_default=models.Func(models.Value("ingest_alert_position"), function="nextval"),
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    server = models.CharField(max_length=200)
    created_at = models.DateTimeField(db_default=Now())
    # The event: its id (the feed looks events up by it, through the id index), and its time
    # and record hash as the alert said them (a SIEM may quote them). The writer numbers the
    # alerts of a batch from the rows its COPY stored (ingest.store), in the same transaction.
    event_id = models.BigIntegerField(null=True)
    event_time = models.DateTimeField(null=True)
    event_hash = models.BinaryField(max_length=16, null=True)
    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, null=True, related_name="alerts", db_index=False
    )  # (health alerts are few: no index kept up for them)
    reason = models.TextField(blank=True, db_default="")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} on {self.server}"


class Split(models.Model):
    """A backlog of one file source read by several workers at once (ingest.split).

    One worker scans the files from the source's checkpoint with the parser and session tracker
    alone, and cuts them into byte ranges (Chunk), each with the tracker's state at its start;
    any worker then reads a range into the store as if it had read everything before it. The
    files' resume points and the source's checkpoint move on only when every range is stored."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="splits")
    run = models.ForeignKey(IngestRun, on_delete=models.CASCADE, related_name="splits")
    created_at = models.DateTimeField(auto_now_add=True)
    planned = models.BooleanField(default=False, help_text="Every range is known (the scan is over)")
    # {"<SourceFile pk>": {"resume": ..., "finished": bool}, ...} once planned, and the state after
    # the last range: what the files and the source's checkpoint become when every range is stored.
    ends = models.JSONField(default=dict, blank=True, encoder=CheckpointEncoder, decoder=CheckpointDecoder)
    final_state = models.JSONField(
        default=dict, blank=True, encoder=CheckpointEncoder, decoder=CheckpointDecoder
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # At most one split of a source under way: the source waits for it.
            models.UniqueConstraint(
                fields=["source"], condition=models.Q(finished_at__isnull=True), name="one_open_split"
            ),
        ]

    def __str__(self) -> str:
        return f"split {self.pk} of source {self.source_id}"


class Chunk(models.Model):
    """One byte range of a split file: [start offset, end_offset) of `source_file`."""

    split = models.ForeignKey(Split, on_delete=models.CASCADE, related_name="chunks")
    number = models.PositiveIntegerField()
    source_file = models.ForeignKey(SourceFile, on_delete=models.CASCADE, related_name="chunks")
    start = models.JSONField(help_text="Resume point of its first byte: offset, line, last_time")
    start_state = models.JSONField(
        help_text="Tracker and gap finder state before its first byte",
        encoder=CheckpointEncoder,
        decoder=CheckpointDecoder,
    )
    end_offset = models.BigIntegerField()
    # Read to the file's end and flushed (the file is finished and this is its last range).
    finish = models.BooleanField(default=False)
    # How far a worker got: the resume point and state after its last committed batch.
    resume = models.JSONField(null=True, blank=True)
    state = models.JSONField(null=True, blank=True, encoder=CheckpointEncoder, decoder=CheckpointDecoder)
    # Flags learnt here about events maybe stored by an earlier range, not stored yet when this
    # one ran: applied again (idempotent) when the split ends. [[flag, [[hash hex, time], ...]]]
    corrections = models.JSONField(
        default=list, blank=True, encoder=CheckpointEncoder, decoder=CheckpointDecoder
    )
    dispatched_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="Host and process that read it")
    done = models.BooleanField(default=False)
    error = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["split", "number"], name="chunk_number")]
        ordering = ["split", "number"]

    def __str__(self) -> str:
        return f"chunk {self.number} of split {self.split_id}"


class CustodyHead(models.Model):
    """The newest link of a source's custody chain. Appending a link locks this row until the
    batch's transaction commits, so links are numbered in commit order (ingest.custody)."""

    source = models.OneToOneField(
        Source, on_delete=models.PROTECT, primary_key=True, related_name="custody_head"
    )
    seq = models.BigIntegerField(default=0)
    hash = models.BinaryField(max_length=32)

    def __str__(self) -> str:
        return f"custody head of source {self.source_id}: link {self.seq}"


class CustodyLink(models.Model):
    """One committed change of the store, chained to the one before it (per source): a batch of
    events (with a digest of each event as it was written), flags added later to stored events,
    or a file's hash so far. See ingest.custody and `manage.py verify_evidence`."""

    class Kind(models.TextChoices):
        EVENTS = "events", "events stored"
        FLAGS = "flags", "flag added to stored events"
        FILE = "file", "file hash so far"
        ADOPTED = "adopted", "events stored before the chain existed, sealed when it began"

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="custody_links")
    seq = models.BigIntegerField(help_text="1, 2, 3... per source, in commit order")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    committed_at = models.DateTimeField()
    source_file = models.ForeignKey(
        SourceFile, on_delete=models.PROTECT, null=True, related_name="custody_links"
    )
    ingest_run_id = models.BigIntegerField(null=True)  # not a key: runs are history, links are evidence
    # Events: the batch's rows are the file's events with ids in (id_after, id_last] and byte offsets
    # in [offset_min, offset_max]; row_digests holds 16 bytes per event, in id order.
    id_after = models.BigIntegerField(null=True)
    id_last = models.BigIntegerField(null=True)
    offset_min = models.BigIntegerField(null=True)
    offset_max = models.BigIntegerField(null=True)
    event_count = models.IntegerField(default=0)
    row_digests = models.BinaryField(default=bytes, editable=False)
    # Version 2 (issue 22): one digest of the batch's rows (`rows_sha256`: SHA-256 of its COPY
    # lines as sent, in id order), `row_digests` only 4 bytes (CRC-32) per row to say which rows
    # differ, and the content chunks the batch stored ([start, length, SHA-256 hex], `chunks`).
    version = models.SmallIntegerField(default=1, db_default=1)
    rows_sha256 = models.BinaryField(null=True, editable=False)  # NULL in links of version 1
    chunks = models.JSONField(null=True, blank=True)
    # Flags: the flag and the events (time, record hash) it was added to.
    flag = models.CharField(max_length=40, blank=True)
    keys = models.JSONField(default=list, blank=True)
    # File: the SHA-256 of its first `file_bytes` content bytes (scope "content"), or of the
    # upload as received (scope "received").
    file_bytes = models.BigIntegerField(null=True)
    file_sha256 = models.CharField(max_length=64, blank=True)
    file_scope = models.CharField(max_length=10, blank=True)
    prev_hash = models.BinaryField(max_length=32)
    hash = models.BinaryField(max_length=32)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "seq"], name="custody_link_once")]
        indexes = [
            # verify_evidence: the links of one file (its hashes so far, the batches read from it).
            models.Index(fields=["source_file", "seq"], name="custody_link_by_file"),
        ]

    def __str__(self) -> str:
        return f"custody link {self.seq} of source {self.source_id} ({self.kind})"


# -- binary logs (issue 21): what the metadata pass found, and the join's links ------------------


class BinlogFile(models.Model):
    """What one stored binary log file says about itself (its format description).

    `boot_started_at` is set on the first file after a server start (its format description's
    creation time): later files of the same server belong to that boot until the next one."""

    source_file = models.OneToOneField(SourceFile, on_delete=models.CASCADE, related_name="binlog")
    server = models.CharField(max_length=200)
    name = models.CharField(max_length=200, help_text="File name as the server wrote it (mariadb-bin.000001)")
    server_version = models.CharField(max_length=100)
    server_id = models.BigIntegerField()
    boot_started_at = models.DateTimeField(null=True)
    # The span of its transactions: the events in it are covered by a binary log (rows_changed 0, not null).
    first_time = models.DateTimeField(null=True)
    last_time = models.DateTimeField(null=True)

    class Meta:
        indexes = [
            # Coverage of an API page's events, and the boots of a server: by server and time.
            models.Index(fields=["server", "first_time"], name="binlog_file_span"),
        ]

    def __str__(self) -> str:
        return f"{self.server}: {self.name}"


class BinlogTransaction(models.Model):
    """One transaction of a binary log (a GTID group, or BEGIN ... COMMIT, or a DDL)."""

    file = models.ForeignKey(BinlogFile, on_delete=models.CASCADE, related_name="transactions")
    server = models.CharField(max_length=200)
    file_name = models.CharField(max_length=200)  # the file's name, kept here for uniqueness
    start = models.BigIntegerField(help_text="Byte position of its first event")
    end = models.BigIntegerField(help_text="Byte position just after its last event")
    gtid = models.CharField(max_length=100, null=True)
    server_id = models.BigIntegerField()
    thread_id = models.BigIntegerField(null=True, help_text="MySQL's BEGIN, MariaDB 11.5+ GTID")
    commit_time = models.DateTimeField()
    ended_by = models.CharField(max_length=12)
    rows = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            # Exactly once: a file ingested again (or a copy of it) stores nothing new. The commit
            # time tells apart files of the same name after a RESET MASTER.
            models.UniqueConstraint(
                fields=["server", "file_name", "start", "commit_time"], name="binlog_transaction_once"
            ),
        ]
        indexes = [
            # The join's windows: a server's transactions by time.
            models.Index(fields=["server", "commit_time"], name="binlog_tx_server_time"),
        ]

    def __str__(self) -> str:
        return f"{self.server}: {self.file_name}:{self.start}"


class BinlogStatement(models.Model):
    """One statement of a transaction that changed rows, and the join's answer for it: the event
    that made it (`event_id`) with `confidence` and `evidence`, or its `candidates` (ambiguous,
    or the CALLs a routine's rows may belong to), or why nothing explains it (`reason`)."""

    class Confidence(models.TextChoices):
        PENDING = "", "not joined yet"
        THREAD_ID = "thread_id", "the binlog names the statement's connection"
        UNIQUE = "unique_text_and_time", "the only statement with this text at that moment"
        ORDERED = "ordered_assignment", "the only assignment that keeps each connection's order"
        AMBIGUOUS = "ambiguous", "several statements fit equally well"
        UNLINKED = "unlinked", "no logged statement explains it"

    SURE = (Confidence.THREAD_ID, Confidence.UNIQUE, Confidence.ORDERED)

    transaction = models.ForeignKey(BinlogTransaction, on_delete=models.CASCADE, related_name="statements")
    # Its transaction's server, kept here too: the join's windows read one server's seconds by
    # the indexes below, not every server's rows of those seconds filtered afterwards.
    server = models.CharField(max_length=200)
    index = models.IntegerField(help_text="Its place in the transaction (0, 1, ...)")
    time = models.DateTimeField(help_text="When it began, to the second (server clock)")
    text = models.TextField(blank=True, help_text="The annotate rows text; empty when the binlog has none")
    has_text = models.BooleanField(default=False)
    text_length = models.IntegerField(default=0)
    thread_id = models.BigIntegerField(null=True)
    rows = models.BigIntegerField(default=0)
    event_id = models.BigIntegerField(null=True)  # not a key: events are partitioned (see Event)
    confidence = models.CharField(max_length=24, choices=Confidence.choices, blank=True, default="")
    evidence = models.JSONField(default=list, blank=True)
    candidates = ArrayField(models.BigIntegerField(), default=list, blank=True)
    reason = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["transaction", "index"], name="binlog_statement_once"),
        ]
        indexes = [
            # rows_changed and /rows/ of an event linked for sure.
            models.Index(
                fields=["event_id"], name="binlog_stmt_event", condition=models.Q(event_id__isnull=False)
            ),
            # The same for an event that is one of several candidates.
            GinIndex(fields=["candidates"], name="binlog_stmt_candidates"),
            # The join's windows: every statement of a server's seconds (they compete for the
            # same events); other servers' rows of those seconds are not read.
            models.Index(fields=["server", "time"], name="binlog_stmt_server_time"),
            # The join's work: statements not joined yet, or not for sure (a log may come later).
            models.Index(
                fields=["server", "time"],
                name="binlog_stmt_server_to_join",
                condition=models.Q(confidence__in=["", "ambiguous", "unlinked"]),
            ),
        ]

    def __str__(self) -> str:
        return f"statement {self.index} of {self.transaction}"


class BinlogChange(models.Model):
    """The rows one statement changed in one table, of one kind: the count, and where the rows
    events are (decoded on demand: ingest.binlog.images)."""

    statement = models.ForeignKey(BinlogStatement, on_delete=models.CASCADE, related_name="changes")
    table = models.CharField(max_length=400)  # db.tbl
    change = models.CharField(max_length=6)  # insert, update, delete
    rows = models.BigIntegerField()
    table_map_position = models.BigIntegerField()
    positions = ArrayField(models.BigIntegerField())

    def __str__(self) -> str:
        return f"{self.change} {self.rows} rows of {self.table}"


class BinlogJoinState(models.Model):
    """How far the join has looked at a server's events: a later join takes up again only the
    binlog rows it left unsure whose moments new events reach (ingest.binlog_join)."""

    server = models.CharField(max_length=200, unique=True)
    events_seen = models.BigIntegerField(default=0, help_text="The highest event id looked at")

    def __str__(self) -> str:
        return f"{self.server}: joined up to event {self.events_seen}"
