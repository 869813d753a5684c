"""The log formats AuditWeb reads: one module each, and the one tuple that registers them.

Each module in FORMATS exports `NAME` (its --format name), `LABEL`, `recognise(head)`,
`parse(lines, *, start_offset, start_line, hints)` and `time_digits(head)`; a format whose
parser can say where to resume (the general log) also exports `resumable(...)`. A binary
format (the binlog) has no lines: it exports `read(stream, name)` instead of `parse`, and
`reads_bytes(fmt)` says which kind a format is. Everything
else (the ingest command, the Source model's choices, the upload form, the readers of
followed files) asks this module. docs/architecture.md, "Adding a format", says more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, Protocol, cast

from ingest.parsers import (
    audit_csv,
    binlog,
    general_log,
    general_log_csv,
    general_log_tsv,
    json_audit,
    oracle_csv,
    oracle_json,
    oracle_xml,
    pgaudit_csv,
    pgaudit_json,
    pgaudit_stderr,
    server_audit,
    xml_audit,
)
from ingest.parsers.records import NO_HINTS, Hints, Item, ParsePoint, Resumable

__all__ = [
    "AUTO",
    "FORMATS",
    "NAMES",
    "LogFormat",
    "binary_reader",
    "by_name",
    "dialect_of",
    "format_choices",
    "open_parser",
    "reads_bytes",
    "waits_for_next_line",
]


class LogFormat(Protocol):
    """What a format's module exports (a module satisfies this protocol)."""

    NAME: str  # the --format name; stored in Source.format, so never renamed
    LABEL: str  # what the forms and reports call it

    def recognise(self, head: bytes) -> bool:
        """Whether a file's first KiB is in this format (tried in FORMATS order)."""
        ...

    def parse(
        self, lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
    ) -> Iterator[Item]:
        """Every record, banner and problem of these lines, in order; never raises on bad bytes.
        (A binary format exports `read(stream, name)` instead: see `reads_bytes`.)"""
        ...

    def time_digits(self, head: bytes) -> int | None:
        """Digits after the seconds a record's time printed, from its first bytes (None: unknown)."""
        ...


# Tried in this order by detect_format: the layouts with the most distinctive shape first, so
# that a looser test never claims a file another one knows: a binlog's magic bytes first (the
# most distinctive of all), then PostgreSQL's logs, whose first line is the server's own fixed
# layout (jsonlog before the JSON audit logs, which also begin with `{`); Oracle's exports, whose
# heads name the trail's columns (before the JSON and XML audit logs, which they would not
# claim, but kept ahead of the looser CSV tests); then a JSON or XML
# audit log, the quoted CSV layouts, the tab-separated export, server_audit's comma lines, and
# last the general log, whose test looks for any line of its several layouts.
FORMATS: tuple[LogFormat, ...] = (
    binlog,
    pgaudit_json,
    pgaudit_csv,
    pgaudit_stderr,
    oracle_json,
    oracle_csv,
    oracle_xml,
    json_audit,
    xml_audit,
    audit_csv,
    general_log_csv,
    general_log_tsv,
    server_audit,
    general_log,
)

NAMES: tuple[str, ...] = tuple(f.NAME for f in FORMATS)
AUTO = "auto"  # not a format: "recognise it from the file's first bytes"

_BY_NAME = {f.NAME: f for f in FORMATS}
assert len(_BY_NAME) == len(FORMATS), "two formats share a NAME"


def by_name(name: str) -> LogFormat:
    """The format named `name`; ValueError naming the formats there are when there is none."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"Format {name!r} is not supported yet (supported: {', '.join(NAMES)}).") from None


# The SQL dialect of a format that does not name one: MySQL's and MariaDB's logs, which share
# one classifier (ingest.sql).
DEFAULT_DIALECT = "mysql"


def dialect_of(name: str) -> str:
    """The SQL dialect of the server that writes format `name` (its module's `DIALECT`), which
    decides how its statements are classified: "mysql" (MySQL and MariaDB), "postgres" or
    "oracle"."""
    return str(getattr(by_name(name), "DIALECT", DEFAULT_DIALECT))


def format_choices() -> list[tuple[str, str]]:
    """`auto` and every format, for a model field's or a form's choices (a callable, so that a
    new format needs no migration)."""
    return [(AUTO, "Auto"), *((f.NAME, f.LABEL) for f in FORMATS)]


class _Whole:
    """A parser that cannot say its resume point, as a Resumable: everything is parsed in `feed`
    (the last item included), and a reader resumes before an item at the item's own position."""

    def __init__(self, fmt: LogFormat, start_offset: int, start_line: int, hints: Hints) -> None:
        self._fmt, self._start = fmt, (start_offset, start_line, hints)

    def feed(self, lines: Iterable[bytes]) -> Iterator[Item]:
        offset, line, hints = self._start
        return self._fmt.parse(lines, start_offset=offset, start_line=line, hints=hints)

    def finish(self) -> Iterator[Item]:
        return iter(())

    def resume_point(self) -> ParsePoint | None:
        return None


def _resumable(fmt: LogFormat) -> Callable[..., Resumable] | None:
    # An optional export: only formats whose records end where the next begins need it.
    return cast(Callable[..., Resumable] | None, getattr(fmt, "resumable", None))


def binary_reader(fmt: LogFormat) -> Callable[[BinaryIO, str], Iterator[object]] | None:
    """A binary format's `read(stream, name)` (None for a line format)."""
    return cast(Callable[[BinaryIO, str], Iterator[object]] | None, getattr(fmt, "read", None))


def reads_bytes(fmt: LogFormat) -> bool:
    """Whether `fmt` is a binary format (a `read(stream, name)`, no lines to parse): its files go
    to `ingest.binlog_store`, not to the line readers."""
    return binary_reader(fmt) is not None


def open_parser(
    fmt: LogFormat, *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Resumable:
    """A parser of `fmt` to feed lines read from a resume point: the format's own resumable one
    when it has one, else its `parse` (whose resume point is then always None). ValueError for
    a binary format: it has no lines (following one is not built yet; `ingest` reads it whole)."""
    if reads_bytes(fmt):
        raise ValueError(f"{fmt.LABEL} files have no lines: they are read whole by `manage.py ingest`")
    make = _resumable(fmt)
    if make is not None:
        return make(start_offset=start_offset, start_line=start_line, hints=hints)
    return _Whole(fmt, start_offset, start_line, hints)


def waits_for_next_line(fmt: LogFormat) -> bool:
    """Whether the parser holds its last record until the next line begins (a resumable one):
    a read that ends at a given offset must then let it see the line after."""
    return _resumable(fmt) is not None
