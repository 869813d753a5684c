"""A table's columns from its CREATE TABLE text (sqlglot), for binlogs without FULL metadata.

Without binlog_row_metadata=FULL a table map has types but no names, charsets or primary
key; and no binlog says which columns are generated (flashback must leave them out). A
`CREATE TABLE` seen in the logs or given by the user fills these in, by column position.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

BINARY_TYPES = {
    exp.DataType.Type.BINARY, exp.DataType.Type.VARBINARY, exp.DataType.Type.BLOB,
    exp.DataType.Type.TINYBLOB, exp.DataType.Type.MEDIUMBLOB, exp.DataType.Type.LONGBLOB,
}  # fmt: skip


@dataclass(slots=True, frozen=True)
class SchemaColumn:
    name: str
    generated: bool  # VIRTUAL or STORED generated column: never written by flashback
    charset: str | None  # its own or the table's default (text types); "binary" for binary types


@dataclass(slots=True, frozen=True)
class TableSchema:
    table: str  # as written in the CREATE TABLE (may lack the database)
    columns: tuple[SchemaColumn, ...]
    primary_key: tuple[str, ...]

    def column(self, name: str) -> SchemaColumn | None:
        return next((c for c in self.columns if c.name == name), None)


class SchemaError(ValueError):
    pass


def parse_create_table(sql: str) -> TableSchema:
    """The columns of a `CREATE TABLE` (as SHOW CREATE TABLE prints it, MySQL or MariaDB)."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.ParseError as e:
        raise SchemaError(f"not a CREATE TABLE sqlglot can read: {str(e)[:200]}") from e
    if not isinstance(tree, exp.Create) or not isinstance(tree.this, exp.Schema):
        raise SchemaError("not a CREATE TABLE with a column list")
    default_charset = None
    for prop in tree.find_all(exp.CharacterSetProperty):
        default_charset = prop.this.name.lower()
    table = tree.this.this
    name = ".".join(p for p in (table.db, table.name) if p) if isinstance(table, exp.Table) else ""
    columns = []
    primary: list[str] = []
    for item in tree.this.expressions:
        if isinstance(item, exp.ColumnDef):
            kinds = [c.args.get("kind") for c in item.args.get("constraints") or []]
            generated = any(isinstance(k, exp.ComputedColumnConstraint) for k in kinds)
            named = [k.this.name.lower() for k in kinds if isinstance(k, exp.CharacterSetColumnConstraint)]
            charset = named[0] if named else None
            dtype = item.args.get("kind")
            if isinstance(dtype, exp.DataType) and dtype.this in BINARY_TYPES:
                charset = "binary"
            elif isinstance(dtype, exp.DataType) and dtype.is_type(*exp.DataType.TEXT_TYPES, "char"):
                charset = charset or default_charset
            else:
                charset = charset if charset else None
            if any(isinstance(k, exp.PrimaryKeyColumnConstraint) for k in kinds):
                primary.append(item.name)
            columns.append(SchemaColumn(item.name, generated, charset))
        elif isinstance(item, exp.PrimaryKey):
            primary = [e.name for e in item.expressions]
    if not columns:
        raise SchemaError("a CREATE TABLE without columns")
    return TableSchema(name, tuple(columns), tuple(primary))
