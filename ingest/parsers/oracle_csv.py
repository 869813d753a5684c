"""Oracle UNIFIED_AUDIT_TRAIL exported by SQLcl or SQL*Plus as CSV. Pure: no Django.

`SET SQLFORMAT csv` (SQLcl) or `SET MARKUP CSV ON` (SQL*Plus 12.2+) and a SELECT of the trail
write a header line of quoted column names, then one line per row: text quoted with `"` (a
quote inside doubled), numbers and times unquoted, NULL as an empty field; SQL_TEXT may hold
newlines inside its quotes, so a record ends at the first line end outside quotes (quote
parity, linear). The header names the columns: any subset of UNIFIED_AUDIT_TRAIL's, in any
order (ingest.parsers.oracle_audit reads them). SQLcl's `N rows selected.` line is skipped.
A read that starts after the header (a followed file resumed) cannot name the columns: it
yields one Problem saying so; exports are read whole (`manage.py ingest`, uploads).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator

from ingest.parsers.oracle_audit import DIALECT, MAX_RECORD_BYTES, row_record, time_digits
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, Problem, checked_integers, csv_records

__all__ = ["DIALECT", "LABEL", "NAME", "parse", "recognise", "time_digits"]

NAME = "oracle-csv"
LABEL = "Oracle UNIFIED_AUDIT_TRAIL, SQLcl CSV"

_HEADER_RE = re.compile(
    rb'\A(?:\xef\xbb\xbf)?"[A-Z_][A-Z0-9_$#]{0,127}"(?:,"[A-Z_][A-Z0-9_$#]{0,127}"){1,400}\r?\n?\Z'
)
_FEEDBACK_RE = re.compile(rb"\A\s*(?:\d{1,19} rows? selected\.|no rows selected)\s*\Z")


def recognise(head: bytes) -> bool:
    """A SQLcl CSV export of the trail: a header of quoted names with ACTION_NAME and a time."""
    first = head.split(b"\n", 1)[0] + b"\n"
    if _HEADER_RE.match(first) is None:
        return False
    return b'"ACTION_NAME"' in first and (b'"EVENT_TIMESTAMP_UTC"' in first or b'"EVENT_TIMESTAMP"' in first)


def structure(line: bytes) -> bool:
    """Whether a line is the export's own structure, no row: the header, SQLcl's feedback, blank."""
    return not line.strip() or _FEEDBACK_RE.match(line) is not None or _HEADER_RE.match(line) is not None


def csv_fields(raw: bytes) -> list[str] | str:
    """The fields of one record, or why it is none."""
    text = raw.decode("utf-8", "surrogateescape").rstrip("\r\n")
    try:
        rows = list(csv.reader([text], strict=True))
    except csv.Error as error:
        return f"not a CSV record: {error}"
    if len(rows) != 1:
        return "not a CSV record"
    return rows[0]


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: object | None = None
) -> Iterator[Item]:
    """Every record and problem of a SQLcl CSV export, in order (hints: none needed)."""
    yield from checked_integers(_parse(lines, start_offset, start_line))


def _parse(lines: Iterable[bytes], start_offset: int, start_line: int) -> Iterator[Item]:
    columns: list[str] | None = None
    for offset, line, raw, too_long in csv_records(lines, start_offset, start_line, MAX_RECORD_BYTES):
        if too_long:
            yield Problem(
                line, offset, raw[:PROBLEM_EXCERPT_BYTES], f"record longer than {MAX_RECORD_BYTES} bytes"
            )
            continue
        if not raw.strip() or _FEEDBACK_RE.match(raw):
            continue  # a blank line, or SQLcl's feedback after the rows: no record
        if columns is None:
            if _HEADER_RE.match(raw.lstrip(b"\xef\xbb\xbf")) is None:
                yield Problem(
                    line,
                    offset,
                    raw[:PROBLEM_EXCERPT_BYTES],
                    "no header line of column names before this record: a CSV export is read whole,"
                    " from its first line",
                )
                return
            header = csv_fields(raw.lstrip(b"\xef\xbb\xbf"))
            columns = [c.upper() for c in header] if isinstance(header, list) else []
            continue
        fields = csv_fields(raw)
        if isinstance(fields, str):
            yield Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], fields)
            continue
        if len(fields) != len(columns):
            yield Problem(
                line,
                offset,
                raw[:PROBLEM_EXCERPT_BYTES],
                f"{len(fields)} fields where the header names {len(columns)} columns",
            )
            continue
        yield row_record(dict(zip(columns, fields, strict=True)), line=line, offset=offset, raw=raw)
