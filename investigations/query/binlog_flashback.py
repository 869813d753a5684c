"""Flashback SQL for a whole case, and for a time range on one table (as the per-event one:
ingest.binlog.flashback writes it, AuditWeb never runs it).

A case's: the row statements linked for sure to its pinned events, newest statement first, in
one transaction; pinned events whose rows are only possibly theirs are named in a comment and
left out. A range's: every row change to the table committed in [since, until], whatever the
join said of it, newest first, and only that table's rows (a trigger's rows in another table
are not undone). Bounded: beyond MAX_ROWS rows nothing is decoded and the caller is told to
narrow (the stored counts say how many there are before any decoding).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Q, Sum

from ingest.binlog.flashback import TableInfo, flashback_sql, table_info
from ingest.binlog.images import RowImage, row_images, table_of
from ingest.binlog.metadata import TableChange
from ingest.binlog.reader import BinlogError, read_format
from ingest.binlog.schema import TableSchema
from ingest.binlog_store import open_binlog
from ingest.models import BinlogChange, BinlogStatement
from investigations.models import Evidence
from investigations.query.binlog import RowsUnavailable, create_table_schema

MAX_ROWS = 100_000  # rows one flashback script undoes
NEWEST_FIRST = (
    "-transaction__commit_time",
    "-transaction__file_name",
    "-transaction__start",
    "-index",
)


class TooManyRows(Exception):
    """More rows than one script undoes: narrow the range (or the case)."""


def _one_line(text: str) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in text)[:300]


def _script(statements: Sequence[BinlogStatement], notes: list[str], table: str | None = None) -> str:
    """The SQL undoing the statements (given newest first); only `table`'s rows if given."""
    infos: dict[str, TableInfo] = {}
    schemas: dict[tuple[str, str], TableSchema | None] = {}
    unknown: set[str] = set()
    undo: list[tuple[str, list[RowImage]]] = []
    for s in statements:
        binlog = s.transaction.file
        changes = BinlogChange.objects.filter(statement=s).order_by("id")
        if table is not None:
            changes = changes.filter(table=table)
        rows: list[RowImage] = []
        try:
            with open_binlog(binlog.source_file.path) as f:
                fmt = read_format(f)
                for c in changes:
                    change = TableChange(c.table, c.change, c.rows, c.table_map_position, list(c.positions))
                    key = (binlog.server, c.table)
                    if key not in schemas:
                        schemas[key] = create_table_schema(*key)
                    if schemas[key] is None:
                        unknown.add(c.table)
                    tabledef = table_of(f, change, fmt)
                    infos[tabledef.name] = table_info(tabledef, schemas[key])
                    rows.extend(row_images(f, change, schema=schemas[key], fmt=fmt))
        except (OSError, BinlogError) as e:
            raise RowsUnavailable(f"{binlog.source_file.path}: {e}") from None
        who = f"event {s.event_id} ({s.confidence})" if s.event_id else (s.confidence or "not joined")
        label = f"{binlog.name} at {s.transaction.start}, {who}: {s.text or '(no statement text)'}"
        undo.append((label, rows))
    notes = list(notes)
    if not statements:
        notes.append("No binary log rows are tied to this: there is nothing to undo.")
    notes += [
        f"{t}: no CREATE TABLE in the logs, so its generated columns (if any) are not known:"
        " leave them out of the INSERTs before running this"
        for t in sorted(unknown)
    ]
    # Undo the newest statement first, each statement's newest row first (flashback_sql).
    return "\n".join("-- " + _one_line(n) for n in notes) + "\n" + flashback_sql(undo, infos)


def _bounded(statements: Sequence[BinlogStatement], rows: int) -> None:
    if rows > MAX_ROWS:
        raise TooManyRows(
            f"{rows:,} rows: more than the {MAX_ROWS:,} one flashback script undoes. Narrow it "
            "(a shorter range, fewer events), or take the statements one by one."
        )


def case_flashback(case_id: int, event_ids: Sequence[int]) -> str:
    """The flashback of a case's pinned events: their sure-linked row statements, newest first."""
    sure = (
        BinlogStatement.objects.filter(event_id__in=event_ids, confidence__in=BinlogStatement.SURE)
        .select_related("transaction__file__source_file")
        .order_by(*NEWEST_FIRST)
    )
    total = sure.aggregate(n=Sum("rows"))["n"] or 0
    _bounded(sure, total)
    unsure = sorted(
        {c for cands in BinlogStatement.objects.filter(candidates__overlap=list(event_ids))
         .exclude(event_id__in=event_ids).values_list("candidates", flat=True) for c in cands}
        & set(event_ids)
    )  # fmt: skip
    notes = [
        f"AuditWeb case {case_id}: the rows of its pinned events linked for sure, newest statement first."
    ]
    if unsure:
        listed = ", ".join(str(pk) for pk in unsure[:50]) + (" ..." if len(unsure) > 50 else "")
        notes.append(
            "Left out: pinned events whose rows are only possibly theirs (ambiguous, or a routine's): "
            + listed
        )
    return _script(list(sure), notes)


def table_range_flashback(server: str, table: str, since: datetime, until: datetime) -> str:
    """Every row change to `table` on `server` committed in [since, until], linked or not, newest first."""
    changes = BinlogChange.objects.filter(
        table=table,
        statement__transaction__server=server,
        statement__transaction__commit_time__gte=since,
        statement__transaction__commit_time__lte=until,
    )
    total = changes.aggregate(n=Sum("rows"))["n"] or 0
    statements = (
        BinlogStatement.objects.filter(Q(pk__in=changes.values("statement_id")))
        .select_related("transaction__file__source_file")
        .order_by(*NEWEST_FIRST)
    )
    _bounded(statements, total)
    notes = [
        f"AuditWeb: every binary log row change to {table} on server {server} committed from "
        f"{since:%Y-%m-%d %H:%M:%S} to {until:%Y-%m-%d %H:%M:%S} UTC, linked to a statement or not, "
        "newest first.",
        "Rows other tables changed in the same statements (a trigger's) are not undone here.",
    ]
    return _script(list(statements), notes, table=table)


def case_binlog_rows(case_id: int) -> int:
    """Rows of the binary log linked for sure to the case's pinned events (its flashback's rows)."""
    pinned = Evidence.objects.filter(case_id=case_id).values("event_id")
    sure = BinlogStatement.objects.filter(event_id__in=pinned, confidence__in=BinlogStatement.SURE)
    return sure.aggregate(n=Sum("rows"))["n"] or 0
