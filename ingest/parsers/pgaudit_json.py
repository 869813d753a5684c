"""pgAudit in PostgreSQL's jsonlog (`log_destination = 'jsonlog'`, PostgreSQL 15 and later).
Pure: no Django.

One server message is one JSON object on one line (the server escapes newlines); keys with
no value are left out. See ingest/parsers/pgaudit.py for the records made.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from ingest.parsers.pgaudit import DIALECT, MAX_MESSAGE_BYTES, Resumer, ServerLine, assemble, time_digits
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, Problem

__all__ = ["DIALECT", "LABEL", "NAME", "parse", "recognise", "resumable", "time_digits"]

NAME = "pgaudit-json"
LABEL = "PostgreSQL jsonlog with pgAudit"

# jsonlog writes these keys first, in this order, on every line.
_HEAD_RE = re.compile(rb'\A\{"timestamp":"\d{4}-\d{2}-\d{2} [^"\n]{8,48}",(?:"user":|"pid":)')
_MARK = b'"error_severity":"'


def recognise(head: bytes) -> bool:
    """A jsonlog: the first line starts as jsonlog's do and names an error_severity."""
    first = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0]
    return _HEAD_RE.match(first) is not None and (_MARK in first or len(first) >= len(head) - 1)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    return str(value) if str(value) != "" else None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # a lone surrogate escape, NaN...: the standard library reads more


def _lines(lines: Iterable[bytes], offset: int, number: int) -> Iterator[ServerLine | Problem]:
    for raw in lines:
        here, line = offset, number
        offset += len(raw)
        if raw.endswith(b"\n"):
            number += 1
        body = raw.strip()
        if not body:
            continue
        if len(raw) > MAX_MESSAGE_BYTES:
            yield Problem(
                line, here, raw[:PROBLEM_EXCERPT_BYTES], f"jsonlog line longer than {MAX_MESSAGE_BYTES} bytes"
            )
            continue
        try:
            v = _loads(body)
        except (ValueError, RecursionError) as error:
            yield Problem(line, here, raw[:PROBLEM_EXCERPT_BYTES], f"not valid JSON: {error}")
            continue
        if not isinstance(v, dict) or not isinstance(v.get("error_severity"), str):
            yield Problem(
                line, here, raw[:PROBLEM_EXCERPT_BYTES], "not a jsonlog message (no error_severity)"
            )
            continue
        port = v.get("remote_port")
        yield ServerLine(
            line=line,
            offset=here,
            raw=raw,
            time=_text(v.get("timestamp")),
            user=_text(v.get("user")),
            database=_text(v.get("dbname")),
            pid=_int(v.get("pid")),
            host=_text(v.get("remote_host")),
            port=str(port) if type(port) is int else _text(port),
            session=_text(v.get("session_id")),
            session_line=_int(v.get("line_num")),
            tag=_text(v.get("ps")),
            vxid=_text(v.get("vxid")),
            severity=v["error_severity"],
            sqlstate=_text(v.get("state_code")),
            message=_text(v.get("message")) or "",
            detail=_text(v.get("detail")),
            statement=_text(v.get("statement")),
            application=_text(v.get("application_name")),
        )


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: object | None = None
) -> Iterator[Item]:
    """Every record and problem of a pgAudit jsonlog, in order (hints: none needed)."""
    yield from assemble(_lines(lines, start_offset, start_line))


def resumable(*, start_offset: int = 0, start_line: int = 1, hints: object | None = None) -> Resumer:
    """A parser that says where to resume (ingest.parsers.pgaudit.Resumer): a statement's lines
    may come later, between other sessions' lines."""
    return Resumer(_lines, start_offset, start_line)
