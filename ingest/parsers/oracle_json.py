"""Oracle UNIFIED_AUDIT_TRAIL exported by SQLcl as JSON. Pure: no Django.

`SET SQLFORMAT json` and a SELECT of the trail write one document:
`{"results":[{"columns":[{"name":"DBUSERNAME","type":"VARCHAR2"},...],"items":` then a newline,
`[`, and the rows as objects keyed by the column names in lower case (`{"dbusername":"SCOTT",
...}`), one a line, each after the first preceded by a comma, and `]}]}` to end. Numbers are
JSON numbers, times strings under the session's NLS format, NULL is null or left out. Older
releases write the rows on one line; `json-formatted` indents it all. A scanner finds each row
object wherever it stands (strings and escapes followed, linear), so each record's raw bytes are
exactly its object, and a read may resume before any row (the rows name their columns).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from ingest.parsers.oracle_audit import DIALECT, MAX_RECORD_BYTES, row_record, time_digits
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, Problem, checked_integers

__all__ = ["DIALECT", "LABEL", "NAME", "parse", "recognise", "time_digits"]

NAME = "oracle-json"
LABEL = "Oracle UNIFIED_AUDIT_TRAIL, SQLcl JSON"

_HEAD_RE = re.compile(rb'\A\s*\{\s*"results"\s*:\s*\[\s*\{\s*"columns"\s*:\s*\[')
_ITEMS_RE = re.compile(rb'"items"\s*:\s*\[')
_STRUCTURE = re.compile(rb'["{}\\]')
_IN_STRING = re.compile(rb'["\\]')
_NOT_BETWEEN = re.compile(rb"[^\s,]")  # what may stand between rows: space and commas
MAX_HEAD_BYTES = 1 << 20  # the columns' list before "items" (a few KiB in practice)


def recognise(head: bytes) -> bool:
    """A SQLcl JSON export of the trail: `{"results":[{"columns":[` naming ACTION_NAME."""
    body = head.lstrip(b"\xef\xbb\xbf")
    return _HEAD_RE.match(body) is not None and b'"ACTION_NAME"' in body.upper()


def structure(line: bytes) -> bool:
    """Whether a line is the document's own structure, no row: the columns' head, `[`, `]}]}`."""
    body = line.strip()
    if not body.strip(b"{}[],:") or b'"results"' in body or b'"columns"' in body:
        return True
    return b'"name":' in body and b'"type":' in body  # the columns' list (the trail has no such column)


def loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # a lone surrogate escape: the standard library reads more


class _Scanner:
    """Row objects of the items arrays, with their offset and line.

    1. Outside the rows (`head`): look for `"items": [` (a read that starts past the head, at
       a row's own offset, starts inside the rows).
    2. Inside the rows: space and commas are skipped; `{` opens a row; `]` ends the array
       (back to 1: a document may hold several results); anything else is a Problem.
    3. Inside a row: `{`/`}` counted outside strings, strings skipped to their closing quote
       (a backslash escapes the next byte); the row ends when the count is back to zero.
    """

    def __init__(self, offset: int, line: int) -> None:
        self.offset, self.line = offset, line
        self.mode = "head" if offset == 0 else "between"
        self.head = bytearray()
        self.head_at = (offset, line)  # where the bytes before "items" began
        self.row: list[bytes] = []
        self.row_size = 0
        self.row_at = (0, 0)
        self.depth = 0
        self.in_string = self.escaped = self.too_long = False

    def feed(self, lines: Iterable[bytes]) -> Iterator[Item]:
        for chunk in lines:
            yield from self._chunk(chunk)
            self.offset += len(chunk)
            self.line += chunk.count(b"\n")

    def finish(self) -> Iterator[Item]:
        if self.row:
            offset, line = self.row_at
            yield Problem(
                line, offset, b"".join(self.row)[:PROBLEM_EXCERPT_BYTES], "unfinished row at the end"
            )
        elif self.mode == "head" and self.head.strip(b" \t\r\n]}"):  # (not the document's close)
            offset, line = self.head_at
            yield Problem(line, offset, bytes(self.head[:PROBLEM_EXCERPT_BYTES]), 'no "items" array')

    def _line_at(self, chunk: bytes, pos: int) -> int:
        return self.line + chunk.count(b"\n", 0, pos)

    def _chunk(self, chunk: bytes) -> Iterator[Item]:
        pos, n = 0, len(chunk)
        while pos < n:
            if self.mode == "head":
                if not self.head:
                    self.head_at = (self.offset + pos, self._line_at(chunk, pos))
                self.head += chunk[pos:]
                m = _ITEMS_RE.search(self.head)
                if m is None:
                    if len(self.head) > MAX_HEAD_BYTES:
                        yield Problem(
                            self.head_at[1],
                            self.head_at[0],
                            bytes(self.head[:PROBLEM_EXCERPT_BYTES]),
                            'no "items" array',
                        )
                        self.head = bytearray()
                    return
                pos = n - (len(self.head) - m.end())
                before = bytes(self.head[: m.start()]).lstrip(b"\xef\xbb\xbf").lstrip()
                if _HEAD_RE.match(before) is None and not before.startswith((b"}", b",")):
                    # Not the document's head (nor a next result's, after `]}`): reported, and
                    # the rows after it read all the same.
                    offset, line = self.head_at
                    yield Problem(
                        line, offset, before[:PROBLEM_EXCERPT_BYTES], "not the head of a SQLcl JSON export"
                    )
                self.head = bytearray()
                self.mode = "between"
                continue
            if self.mode == "between":
                m = _NOT_BETWEEN.search(chunk, pos)
                if m is None:
                    return
                pos = m.start()
                byte = chunk[pos : pos + 1]
                if byte == b"]":
                    self.mode = "head"
                    pos += 1
                    continue
                if byte != b"{":
                    end = chunk.find(b"\n", pos)
                    end = n if end < 0 else end + 1
                    yield Problem(
                        self._line_at(chunk, pos),
                        self.offset + pos,
                        chunk[pos:end][:PROBLEM_EXCERPT_BYTES],
                        "not a row object where the rows are",
                    )
                    pos = end
                    continue
                whole = self._whole_row(chunk, pos)
                if whole is not None:  # the common case: the row is the rest of its line
                    row_end, value = whole
                    raw = chunk[pos:row_end]
                    fields = {str(k): (None if isinstance(v, dict | list) else v) for k, v in value.items()}
                    yield row_record(
                        fields, line=self._line_at(chunk, pos), offset=self.offset + pos, raw=raw
                    )
                    pos = row_end
                    continue
                self.mode, self.depth, self.in_string, self.escaped, self.too_long = (
                    "row",
                    0,
                    False,
                    False,
                    False,
                )
                self.row, self.row_size = [], 0
                self.row_at = (self.offset + pos, self._line_at(chunk, pos))
            # in a row: scan to its end or the chunk's
            start = pos
            end = self._scan(chunk, pos)
            piece = chunk[start : n if end is None else end]
            self.row_size += len(piece)
            if self.row_size <= MAX_RECORD_BYTES:
                self.row.append(piece)
            elif not self.too_long:
                self.too_long = True
            if end is None:
                return
            pos = end
            yield from self._row_done()
            self.mode = "between"

    def _scan(self, chunk: bytes, pos: int) -> int | None:
        """Where the row ends in `chunk` (after its `}`), or None when it goes on."""
        n = len(chunk)
        if self.escaped:
            self.escaped = False
            pos += 1
        while pos < n:
            if self.in_string:
                m = _IN_STRING.search(chunk, pos)
                if m is None:
                    return None
                if m.group() == b"\\":
                    if m.end() >= n:
                        self.escaped = True
                        return None
                    pos = m.end() + 1
                    continue
                self.in_string = False
                pos = m.end()
                continue
            m = _STRUCTURE.search(chunk, pos)
            if m is None:
                return None
            c = m.group()
            pos = m.end()
            if c == b'"':
                self.in_string = True
            elif c == b"{":
                self.depth += 1
            elif c == b"}":
                self.depth -= 1
                if self.depth == 0:
                    return pos
        return None

    def _whole_row(self, chunk: bytes, pos: int) -> tuple[int, dict[str, Any]] | None:
        """(end, value) when everything from `pos` to the line end is one JSON object (SQLcl's
        one row a line): read at once, without the scanner; None otherwise (the scanner reads)."""
        end = len(chunk.rstrip(b"\r\n"))
        if end - pos > MAX_RECORD_BYTES or chunk[end - 1 : end] != b"}":
            return None
        try:
            value = orjson.loads(chunk[pos:end])
        except orjson.JSONDecodeError:
            return None
        return (end, value) if isinstance(value, dict) else None

    def _row_done(self) -> Iterator[Item]:
        offset, line = self.row_at
        raw = b"".join(self.row)
        self.row = []
        if self.too_long:
            yield Problem(
                line, offset, raw[:PROBLEM_EXCERPT_BYTES], f"row longer than {MAX_RECORD_BYTES} bytes"
            )
            return
        try:
            value = loads(raw)
        except (ValueError, RecursionError) as error:
            yield Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], f"not valid JSON: {error}")
            return
        if not isinstance(value, dict):
            yield Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], "a row is no JSON object")
            return
        fields = {str(k): (None if isinstance(v, dict | list) else v) for k, v in value.items()}
        yield row_record(fields, line=line, offset=offset, raw=raw)


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: object | None = None
) -> Iterator[Item]:
    """Every record and problem of a SQLcl JSON export, in order (hints: none needed)."""
    scanner = _Scanner(start_offset, start_line)
    yield from checked_integers(scanner.feed(lines))
    yield from checked_integers(scanner.finish())
