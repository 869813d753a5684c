"""Flashback SQL: text that undoes a statement's row changes. Never executed by AuditWeb.

A DELETE becomes INSERTs of its before images, an UPDATE sets the before images back
(found by primary key in the after image), an INSERT is deleted (by primary key). Rows are
undone newest first, statements newest first, all in one transaction. Generated columns
are left out (the server computes them). A table without a primary key is matched on every
column with `<=>` (NULL-safe) and `LIMIT 1`, since two identical rows are interchangeable.

Values are exact: integers and DECIMAL as numbers, text as '...' under SET NAMES utf8mb4
(the server converts to the column's charset: every character came from it), text with a
backslash or a control character as `_utf8mb4 X'...'` (so that sql_mode
NO_BACKSLASH_ESCAPES cannot change its meaning), binary as X'...', a VECTOR (MySQL 9) as
STRING_TO_VECTOR('[...]') of its float32 values. A row whose image lacks
columns (binlog_row_image MINIMAL or NOBLOB) cannot be put back whole: it becomes a comment
saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from ingest.binlog.images import RowImage, named_table
from ingest.binlog.rows import Value
from ingest.binlog.schema import TableSchema
from ingest.binlog.tables import TableDef

HEADER = (
    "-- Flashback SQL written by AuditWeb from the binary log. AuditWeb never runs it.\n"
    "-- Rows changed again after these statements are overwritten by it: check them first.\n"
)


@dataclass(slots=True, frozen=True)
class TableInfo:
    """What the SQL needs beyond the images: the key and the generated columns."""

    primary_key: tuple[str, ...] = ()
    generated: frozenset[str] = frozenset()


def table_info(table: TableDef, schema: TableSchema | None = None) -> TableInfo:
    """The key (from the table map's FULL metadata, else the CREATE TABLE) and the generated
    columns (only a CREATE TABLE tells them)."""
    named = named_table(table, schema)
    key = tuple(named.columns[i].name or f"@{i + 1}" for i in named.primary_key)
    generated = frozenset(c.name for c in schema.columns if c.generated) if schema else frozenset()
    return TableInfo(key, generated)


def ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_ident(table: str) -> str:
    db, _, name = table.partition(".")
    return f"{ident(db)}.{ident(name)}" if name else ident(db)


def literal(value: Value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return f"X'{value.hex()}'" if value else "''"
    if isinstance(value, list):  # a VECTOR: each float32 printed as the double it is exactly,
        # which converts back to the same float32 (the bytes are restored exactly)
        return "STRING_TO_VECTOR('[" + ",".join(repr(float(v)) for v in value) + "]')"
    if "\\" in value or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return f"_utf8mb4 X'{value.encode('utf-8').hex()}'"
    return "'" + value.replace("'", "''") + "'"


def _match(image: dict[str, Value], info: TableInfo) -> tuple[str, str]:
    """WHERE clause and LIMIT for one row: by primary key, else by every column."""
    if info.primary_key and all(k in image for k in info.primary_key):
        return " AND ".join(f"{ident(k)} <=> {literal(image[k])}" for k in info.primary_key), ""
    return " AND ".join(f"{ident(k)} <=> {literal(v)}" for k, v in image.items()), " LIMIT 1"


def undo_row(row: RowImage, info: TableInfo) -> str:
    table = table_ident(row.table)
    if not row.complete and row.change != "insert":
        why = "".join(ch if ch.isprintable() else " " for ch in row.note)[:300] or "binlog_row_image not FULL"
        return f"-- a row of {row.table} cannot be restored: its image lacks columns ({why})"
    if row.change == "delete":
        assert row.before is not None
        cols = [k for k in row.before if k not in info.generated]
        values = ", ".join(literal(row.before[k]) for k in cols)
        return f"INSERT INTO {table} ({', '.join(ident(k) for k in cols)}) VALUES ({values});"
    if row.change == "update":
        assert row.before is not None and row.after is not None
        kept = [k for k in row.before if k not in info.generated]
        sets = ", ".join(f"{ident(k)} = {literal(row.before[k])}" for k in kept)
        where, limit = _match(row.after, info)
        return f"UPDATE {table} SET {sets} WHERE {where}{limit};"
    assert row.after is not None
    where, limit = _match(row.after, info)
    return f"DELETE FROM {table} WHERE {where}{limit};"


def undo_statement(rows: Sequence[RowImage], info_of: dict[str, TableInfo], label: str = "") -> list[str]:
    """The lines undoing one statement's rows, newest row first."""
    # The label is log text (hostile): one line, no control characters, capped.
    label = "".join(ch if ch.isprintable() else " " for ch in label)[:200]
    lines = [f"-- undo {label}".rstrip()] if label else []
    for row in reversed(rows):
        lines.append(undo_row(row, info_of.get(row.table, TableInfo())))
    return lines


def flashback_sql(statements: Iterable[tuple[str, Sequence[RowImage]]], info_of: dict[str, TableInfo]) -> str:
    """One script for statements given NEWEST FIRST as (label, rows in server order)."""
    lines = [HEADER + "SET NAMES utf8mb4;", "START TRANSACTION;"]
    for label, rows in statements:
        lines.extend(undo_statement(rows, info_of, label))
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"
