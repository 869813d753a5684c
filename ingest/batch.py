"""The message a read hands the writer (`Batch`) and the point a later read starts from (`ResumePoint`).

Plain data, no database: a Batch is made in the parsing process and crosses the pipe to the
writer, which commits it whole (ingest.commit.commit_batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingest.events import FlagCorrection, GapRecord
from ingest.parsers.records import Problem
from ingest.rows import FormattedBatch


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where the next read of a file starts so that it yields exactly what was not read yet.

    Stored as a dict (SourceFile.resume, Chunk.start and .resume, Split.ends): `to_dict` and
    `from_dict` keep the format those rows already hold."""

    offset: int  # of the first byte not read yet (of the content, for a .gz)
    line: int  # that byte's line number, 1-based
    last_time: datetime | None = None  # the time an old-layout general log carries into it
    # The record stored because its file was quiet, which lines read later may continue
    # (ingest.tail.tail_messages): {"line", "offset", "keys"}.
    settled: dict[str, object] | None = None

    def to_dict(self) -> dict[str, object]:
        stored: dict[str, object] = {
            "offset": self.offset,
            "line": self.line,
            "last_time": self.last_time.isoformat() if self.last_time else None,
        }
        if self.settled is not None:
            stored["settled"] = self.settled
        return stored

    @classmethod
    def from_dict(cls, stored: Mapping[str, object] | None) -> ResumePoint:
        """The point a stored dict names; the start of the file for none (a file not read yet)."""
        if not stored:
            return cls(0, 1)
        last_time = stored.get("last_time")
        settled = stored.get("settled")
        return cls(
            offset=int(str(stored.get("offset", 0))),
            line=int(str(stored.get("line", 1))),
            last_time=datetime.fromisoformat(str(last_time)) if last_time else None,
            settled=settled if isinstance(settled, dict) else None,
        )


@dataclass(frozen=True)
class Batch:
    """What one read made since its last batch, complete up to `resume`: stored in one transaction."""

    formatted: FormattedBatch | None  # the events as COPY rows (None: a scan, which keeps none)
    seen: int  # events made
    problems: list[Problem]
    corrections: list[FlagCorrection]  # flags for events stored before, applied after these
    gaps: list[GapRecord]
    resume: ResumePoint | None  # where the next read starts (None: a read that needs none)
    state: dict[str, Any]  # {"tracker": ..., "gaps": ...} after it, as the checkpoint keeps them
    finished: bool  # the file was read to its end and every stage flushed
    # How far the reader got, for the run's progress: the file's offset (bytes on disk for a
    # one-shot read of a .gz), or rows for a table.
    read_to: int = 0
