"""Plain records that every parser yields: what the log said, and where it said it.

No Django here: parsers turn bytes into these objects, and everything downstream
(session tracking, classification, the store) consumes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

# Longest excerpt of a bad record we keep in a Problem: enough to recognise it,
# bounded because a log line can be arbitrarily long (hostile input).
PROBLEM_EXCERPT_BYTES = 2048


@dataclass(slots=True)
class LogRecord:
    """One entry of a log (a statement or a connection event) exactly as written.

    `occurred_at` is timezone-aware when the log states the zone (`Z`, `+08:00`),
    naive when the log prints server-local time (the pipeline applies the
    source's time zone), and None when the log has printed no time yet.
    """

    line: int  # 1-based number of the record's first line
    offset: int  # byte offset of the record's first byte in the (decompressed) stream
    raw: bytes  # every byte of the record, continuation lines and final newline included
    occurred_at: datetime | None
    connection_id: int | None
    command: str  # as the server names it: "Connect", "Query", "Init DB", "Quit", ...
    argument: bytes  # the rest of the record, continuation lines joined, final newline removed
    # What the record itself says about who and where (Connect lines, table rows, audit logs).
    user: str | None = None
    host: str | None = None
    ip: str | None = None
    database: str | None = None
    # Outcome, where the format tells it: "ok", "denied", or an error code as text.
    status: str | None = None
    rows_affected: int | None = None
    extra: dict[str, str] = field(default_factory=dict)  # format-specific details kept verbatim


@dataclass(slots=True)
class ServerStart:
    """A server start banner ("... Version: ... started with:") in the middle of a log.

    Thread ids start over after it, so it begins a new boot of the server.
    """

    line: int
    offset: int
    raw: bytes
    version: str  # as printed, e.g. "8.0.36 (MySQL Community Server - GPL)"


@dataclass(slots=True)
class Problem:
    """Bytes the parser could not read as a record. Stored and shown, never dropped."""

    line: int
    offset: int
    raw: bytes  # at most PROBLEM_EXCERPT_BYTES of the offending bytes
    reason: str


Item = LogRecord | ServerStart | Problem
