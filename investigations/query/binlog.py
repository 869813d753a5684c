"""Rows from the binary log, for events: `rows_changed`, an event's rows page by page, flashback SQL.

What the join stored (ingest.binlog_join) decides which row statements are an event's: those
linked to it for sure; else those it is a candidate of (an ambiguous link, or a routine's rows
near a CALL), shown with that confidence, never as fact. Row values are decoded from the
binlog file on demand (ingest.binlog.images), only for the page asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from itertools import islice
from typing import Any, BinaryIO

from django.db.models import QuerySet, Sum

from ingest.binlog.flashback import TableInfo, flashback_sql, table_info
from ingest.binlog.images import RowImage, row_images, table_of
from ingest.binlog.metadata import TableChange
from ingest.binlog.reader import BinlogError, Format, read_format
from ingest.binlog.schema import SchemaError, TableSchema, parse_create_table
from ingest.binlog_store import open_binlog
from ingest.models import BinlogChange, BinlogFile, BinlogStatement, Event
from investigations.query.rows_cache import cached_rows

DEFAULT_PAGE = 1000
MAX_PAGE = 10_000
# Weakest last: an answer over several row statements has the confidence of its weakest.
CONFIDENCE_ORDER = ["thread_id", "unique_text_and_time", "ordered_assignment", "ambiguous", "unlinked"]


class RowsUnavailable(Exception):
    """The binlog file the rows are in cannot be read any more (moved, deleted, damaged)."""


def rows_changed_of(events: Iterable[Event]) -> dict[int, int | None]:
    """Each event's `rows_changed`: the rows of the row statements linked to it for sure; 0 for
    an event a binlog of its server covers (its time within a stored file's span) that none is
    linked to; None where no binlog covers it, or where it is only one of several candidates.
    Three queries for a whole page, one when its servers have no binlog."""
    events = list(events)
    ids = [e.pk for e in events]
    spans: dict[str, list[tuple[Any, Any]]] = {}
    for server, first, last in BinlogFile.objects.filter(
        server__in={e.server for e in events}, first_time__isnull=False
    ).values_list("server", "first_time", "last_time"):
        spans.setdefault(server, []).append((first, last + timedelta(seconds=1)))
    if not spans:
        return dict.fromkeys(ids)
    sure = dict(
        BinlogStatement.objects.filter(event_id__in=ids)
        .values("event_id")
        .annotate(n=Sum("rows"))
        .values_list("event_id", "n")
    )
    unsure = {
        c
        for cands in BinlogStatement.objects.filter(candidates__overlap=ids).values_list(
            "candidates", flat=True
        )
        for c in cands
    }
    out: dict[int, int | None] = {}
    for e in events:
        if e.pk in sure:
            out[e.pk] = sure[e.pk]
        elif e.pk in unsure or e.occurred_at is None:
            out[e.pk] = None
        else:
            covered = any(first <= e.occurred_at < end for first, end in spans.get(e.server, []))
            out[e.pk] = 0 if covered else None
    return out


def statements_of(event: Event) -> list[BinlogStatement]:
    """The event's row statements in commit order: linked for sure, else those it is a candidate of."""
    base = BinlogStatement.objects.select_related("transaction__file__source_file").order_by(
        "transaction__commit_time", "transaction__file_name", "transaction__start", "index"
    )
    sure = list(base.filter(event_id=event.pk))
    return sure or list(base.filter(candidates__contains=[event.pk]))


def confidence_of(statements: Sequence[BinlogStatement]) -> str | None:
    known = [s.confidence for s in statements if s.confidence in CONFIDENCE_ORDER]
    return max(known, key=CONFIDENCE_ORDER.index) if known else None


def _changes(statement: BinlogStatement) -> list[TableChange]:
    return [
        TableChange(c.table, c.change, c.rows, c.table_map_position, list(c.positions))
        for c in BinlogChange.objects.filter(statement=statement).order_by("id")
    ]


def create_table_schema(server: str, table: str) -> TableSchema | None:
    """The table's columns from the newest CREATE TABLE the server's logs hold (None: none, or
    one that cannot be read): names where the binlog has none, and the generated columns."""
    sql = (
        Event.objects.filter(server=server, statement_type="CREATE TABLE", tables__contains=[table])
        .order_by("-occurred_at")
        .values_list("sql", flat=True)
        .first()
    )
    if not sql:
        return None
    try:
        return parse_create_table(sql)
    except SchemaError:
        return None


@dataclass(frozen=True)
class RowsPage:
    rows: list[dict[str, Any]]
    total: int  # rows of all the statements
    more: bool


def rows_page(statements: Sequence[BinlogStatement], *, offset: int, limit: int) -> RowsPage:
    """Rows `offset` to `offset + limit` of the statements, JSON-safe (RowImage.as_json). Whole
    table changes before the page are skipped by their stored count, rows events by counting."""
    total = sum(s.rows for s in statements)
    out: list[dict[str, Any]] = []
    skip = offset
    schemas: dict[tuple[str, str], TableSchema | None] = {}
    for s in statements:
        if len(out) >= limit:
            break
        if skip >= s.rows:
            skip -= s.rows
            continue
        binlog = s.transaction.file
        try:
            with open_binlog(binlog.source_file.path) as f:
                fmt = read_format(f)
                for change in _changes(s):
                    if skip >= change.rows:
                        skip -= change.rows
                        continue
                    key = (binlog.server, change.table)
                    if key not in schemas:
                        schemas[key] = create_table_schema(*key)
                    schema, take = schemas[key], min(limit - len(out), change.rows - skip)
                    decode = partial(_decoded, f, fmt, change, schema, skip, take)
                    out.extend(cached_rows(binlog.source_file, change, schema, skip, take, decode))
                    skip = 0
                    if len(out) >= limit:
                        break
        except (OSError, BinlogError) as e:
            raise RowsUnavailable(f"{binlog.source_file.path}: {e}") from None
    return RowsPage(out, total, offset + len(out) < total)


def _decoded(
    f: BinaryIO, fmt: Format, change: TableChange, schema: TableSchema | None, skip: int, take: int
) -> list[dict[str, Any]]:
    """Rows `skip` to `skip + take` of `change`, decoded from the open binlog file."""
    images = row_images(f, change, schema=schema, fmt=fmt, skip=skip)
    return [image.as_json() for image in islice(images, take)]


def event_flashback(event: Event, statements: Sequence[BinlogStatement]) -> str:
    """SQL undoing the statements' rows, newest row and statement first, in one transaction
    (ingest.binlog.flashback). Never executed by AuditWeb."""
    infos: dict[str, TableInfo] = {}
    undo: list[tuple[str, list[RowImage]]] = []
    unknown: set[str] = set()
    for s in statements:
        binlog = s.transaction.file
        rows: list[RowImage] = []
        try:
            with open_binlog(binlog.source_file.path) as f:
                fmt = read_format(f)
                for change in _changes(s):
                    schema = create_table_schema(binlog.server, change.table)
                    if schema is None:
                        unknown.add(change.table)
                    table = table_of(f, change, fmt)
                    infos[table.name] = table_info(table, schema)
                    rows.extend(row_images(f, change, schema=schema, fmt=fmt))
        except (OSError, BinlogError) as e:
            raise RowsUnavailable(f"{binlog.source_file.path}: {e}") from None
        where = f"{binlog.name} at {s.transaction.start}"
        undo.append((f"{where}: {s.text or event.sql}", rows))
    notes = [f"-- AuditWeb event {event.pk} on server {event.server}".replace("\n", " ")]
    if not statements:
        notes.append("-- No binary log rows are tied to this event: there is nothing to undo.")
    notes += [
        f"-- {t}: no CREATE TABLE in the logs, so its generated columns (if any) are not known:"
        " leave them out of the INSERTs before running this"
        for t in sorted(unknown)
    ]
    return (
        "\n".join("".join(ch if ch.isprintable() else " " for ch in n) for n in notes)
        + "\n"
        + (flashback_sql(reversed(undo), infos))
    )


PAGE_ROWS = 100  # rows an event page shows at a time
CELL_CHARS = 200  # of a value shown in a cell (the API gives it whole)


@dataclass(frozen=True)
class Cell:
    before: str | None  # None: the image has no before (an insert)
    after: str | None
    changed: bool  # an update's value that differs between the images


@dataclass(frozen=True)
class Segment:
    """Consecutive rows of one table on the page, under one header of its columns."""

    table: str
    columns: list[str]
    rows: list[tuple[str, list[Cell], str]]  # (change, a cell per column, the row's note or "")

    @property
    def span(self) -> int:
        """Table cells across a row: the change, then each column before and after."""
        return 1 + 2 * len(self.columns)


@dataclass(frozen=True)
class RowsShown:
    statements: list[BinlogStatement]
    confidence: str | None
    evidence: list[str]
    rows_changed: int | None
    segments: list[Segment]
    page: int
    pages: int
    first: int  # 1-based number of the page's first row
    last: int
    total: int
    error: str | None  # the binlog file cannot be read

    @property
    def sure(self) -> bool:
        return self.confidence in BinlogStatement.SURE


def _shown(value: Any) -> str:
    if value is None:
        return "NULL"
    binary = isinstance(value, dict)  # {"base64": ...}
    text = "base64 " + next(iter(value.values()), "") if binary else str(value)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "…"


def _segments(rows: list[dict[str, Any]]) -> list[Segment]:
    segments: list[Segment] = []
    for row in rows:
        before, after = row["before"], row["after"]
        columns = list((before or after or {}).keys())
        if not segments or (segments[-1].table, segments[-1].columns) != (row["table"], columns):
            segments.append(Segment(row["table"], columns, []))
        cells = [
            Cell(
                None if before is None else _shown(before.get(c)),
                None if after is None else _shown(after.get(c)),
                before is not None and after is not None and before.get(c) != after.get(c),
            )
            for c in columns
        ]
        segments[-1].rows.append((row["change"], cells, row.get("note", "")))
    return segments


def rows_shown(event: Event, page: int) -> RowsShown:
    """What the event page shows of the event's rows: one page of PAGE_ROWS, with the link."""
    return statements_shown(statements_of(event), page, rows_changed_of([event])[event.pk])


def statements_shown(statements: list[BinlogStatement], page: int, rows_changed: int | None) -> RowsShown:
    """One page of PAGE_ROWS rows of these row statements, with what the join said of them."""
    evidence: list[str] = []
    for s in statements:
        evidence += [e for e in s.evidence if e not in evidence]
    total = sum(s.rows for s in statements)
    pages = max(1, -(-total // PAGE_ROWS))
    page = min(max(1, page), pages)
    error, rows = None, []
    try:
        rows = rows_page(statements, offset=(page - 1) * PAGE_ROWS, limit=PAGE_ROWS).rows
    except RowsUnavailable as e:
        error = str(e)
    first = (page - 1) * PAGE_ROWS + 1 if rows else 0
    return RowsShown(
        statements=statements,
        confidence=confidence_of(statements),
        evidence=evidence,
        rows_changed=rows_changed,
        segments=_segments(rows),
        page=page,
        pages=pages,
        first=first,
        last=first + len(rows) - 1 if rows else 0,
        total=total,
        error=error,
    )


UNEXPLAINED_PAGE = 100


def unexplained(server: str | None = None, table: str | None = None) -> QuerySet[BinlogStatement]:
    """Row statements no logged statement explains (replication, a routine's body, an event
    scheduler job, a statement the logs lack), newest first: they stay visible."""
    found = BinlogStatement.objects.filter(confidence=BinlogStatement.Confidence.UNLINKED)
    if server:
        found = found.filter(server=server)
    if table:
        found = found.filter(pk__in=BinlogChange.objects.filter(table=table).values("statement_id"))
    return found.select_related("transaction").prefetch_related("changes").order_by("-time", "-id")
