"""MySQL's binary JSON (the JSON column type in row images), decoded to the text MySQL shows.

Our own decoder, not mysql-replication's `parse_json`, for the "opaque" values a document can
hold (a DATE, DATETIME, TIME or DECIMAL stored as such, e.g. by `CAST(... AS JSON)`): the library
turns a DATE into a datetime at midnight, drops a DATETIME's fraction and fails on a TIME of 24
hours or more. MySQL prints them as strings ("2012-03-18", "2012-03-18 11:30:45.000000",
"87:31:46.654321"), a DECIMAL as a number, and any other opaque value as
"base64:type<field type>:<bytes>".

Layout (MySQL's json_binary): a value is a type byte and its data. Objects and arrays (small:
2-byte counts and offsets; large: 4-byte) hold an element count and their size, then for an
object the keys' (offset, length) entries, then one entry per value: its type and either the
value itself (literals and small integers, "inlined") or its offset from the start of the
container. Strings and opaque data are prefixed by a length of 7 bits a byte. Nesting is
bounded (MySQL allows 100 levels) and every offset is checked, so hostile bytes raise
`ValueError` in time linear in their size times the depth.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

DecimalDecoder = Callable[[bytes, int, int], Decimal]  # packed bytes, precision, scale

_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY = 0, 1, 2, 3
_LITERAL, _INT16, _UINT16, _INT32, _UINT32, _INT64, _UINT64, _DOUBLE, _STRING = 4, 5, 6, 7, 8, 9, 10, 11, 12
_OPAQUE = 15
_NUMBERS = {
    _INT16: struct.Struct("<h"), _UINT16: struct.Struct("<H"), _INT32: struct.Struct("<i"),
    _UINT32: struct.Struct("<I"), _INT64: struct.Struct("<q"), _UINT64: struct.Struct("<Q"),
    _DOUBLE: struct.Struct("<d"),
}  # fmt: skip
_MAX_DEPTH = 100
_NEWDECIMAL, _DATE, _TIME, _DATETIME, _TIMESTAMP = 246, 10, 11, 12, 7
_DATETIME2, _TIME2, _TIMESTAMP2, _NEWDATE = 18, 19, 17, 14


def json_text(raw: bytes, decimal: DecimalDecoder) -> str:
    """The document as JSON text (ValueError when the bytes are not one); `decimal` decodes
    MySQL's packed DECIMAL (rows.py has it)."""
    if not raw:
        return "null"  # MySQL writes an empty value for a JSON null set by some paths
    value = _value(raw[0], raw, 1, len(raw), 0, decimal)
    parts: list[str] = []
    _dump(value, parts)
    return "".join(parts)


def _dump(value: Any, out: list[str]) -> None:
    """JSON text as MySQL shows it (", " and ": "), a DECIMAL as its exact digits."""
    if isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            out.append(", " if i else "")
            out.append(json.dumps(k, ensure_ascii=False) + ": ")
            _dump(v, out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for i, v in enumerate(value):
            out.append(", " if i else "")
            _dump(v, out)
        out.append("]")
    elif isinstance(value, Decimal):
        out.append(str(value))
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def _length(data: bytes, at: int, end: int) -> tuple[int, int]:
    length = shift = 0
    for _ in range(5):
        if at >= end:
            raise ValueError("JSON length past the end")
        byte = data[at]
        at += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return length, at
    raise ValueError("JSON length too long")


def _value(kind: int, data: bytes, at: int, end: int, depth: int, decimal: DecimalDecoder) -> Any:
    """The value of `kind` whose data starts at `at` (and may not pass `end`)."""
    if depth > _MAX_DEPTH:
        raise ValueError("JSON nested too deep")
    if kind in (_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY):
        return _container(kind, data, at, end, depth, decimal)
    if kind == _LITERAL:
        return _literal(data[at] if at < end else 255)
    number = _NUMBERS.get(kind)
    if number is not None:
        if at + number.size > end:
            raise ValueError("JSON number past the end")
        return number.unpack_from(data, at)[0]
    if kind == _STRING:
        length, at = _length(data, at, end)
        if at + length > end:
            raise ValueError("JSON string past the end")
        return data[at : at + length].decode("utf-8", "replace")
    if kind == _OPAQUE:
        if at >= end:
            raise ValueError("JSON opaque value past the end")
        field_type = data[at]
        length, at = _length(data, at + 1, end)
        if at + length > end:
            raise ValueError("JSON opaque value past the end")
        return _opaque(field_type, data[at : at + length], decimal)
    raise ValueError(f"JSON value of unknown type {kind}")


def _literal(byte: int) -> Any:
    if byte not in (0, 1, 2):
        raise ValueError("bad JSON literal")
    return (None, True, False)[byte]


def _container(kind: int, data: bytes, start: int, end: int, depth: int, decimal: DecimalDecoder) -> Any:
    large = kind in (_LARGE_OBJECT, _LARGE_ARRAY)
    obj = kind in (_SMALL_OBJECT, _LARGE_OBJECT)
    word = 4 if large else 2
    fmt = "<I" if large else "<H"
    if start + 2 * word > end:
        raise ValueError("JSON container past the end")
    count = struct.unpack_from(fmt, data, start)[0]
    size = struct.unpack_from(fmt, data, start + word)[0]
    limit = start + size
    if limit > end:
        raise ValueError("JSON container larger than its value")
    at = start + 2 * word
    keys: list[str] = []
    if obj:
        if at + count * (word + 2) > limit:
            raise ValueError("JSON keys past the container")
        for i in range(count):
            key_at = start + struct.unpack_from(fmt, data, at + i * (word + 2))[0]
            key_len = struct.unpack_from("<H", data, at + i * (word + 2) + word)[0]
            if key_at + key_len > limit:
                raise ValueError("JSON key past the container")
            keys.append(data[key_at : key_at + key_len].decode("utf-8", "replace"))
        at += count * (word + 2)
    entry = 1 + word
    if at + count * entry > limit:
        raise ValueError("JSON entries past the container")
    values = []
    for i in range(count):
        e = at + i * entry
        kind_i = data[e]
        if kind_i == _LITERAL or kind_i in (_INT16, _UINT16) or (large and kind_i in (_INT32, _UINT32)):
            values.append(_value(kind_i, data, e + 1, e + 1 + word, depth + 1, decimal))  # inlined
        else:
            offset = start + struct.unpack_from(fmt, data, e + 1)[0]
            if offset >= limit:
                raise ValueError("JSON value offset past the container")
            values.append(_value(kind_i, data, offset, limit, depth + 1, decimal))
    return dict(zip(keys, values, strict=True)) if obj else values


def _opaque(field_type: int, raw: bytes, decimal: DecimalDecoder) -> Any:
    """A MySQL value kept in its own type: temporal ones as MySQL prints them, DECIMAL as a
    number, others as MySQL's "base64:type<N>:<data>"."""
    if field_type == _NEWDECIMAL and len(raw) >= 2:
        return decimal(raw[2:], raw[0], raw[1])
    if field_type in (_DATE, _NEWDATE, _DATETIME, _DATETIME2, _TIMESTAMP, _TIMESTAMP2, _TIME, _TIME2):
        if len(raw) < 8:
            raise ValueError("short JSON temporal value")
        packed = struct.unpack_from("<q", raw)[0]
        sign = "-" if packed < 0 else ""
        packed = abs(packed)
        micro = packed % (1 << 24)
        whole = packed >> 24
        if field_type in (_TIME, _TIME2):
            hours, minutes, seconds = (whole >> 12) % (1 << 10), (whole >> 6) % 64, whole % 64
            return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}.{micro:06d}"
        ymd, hms = whole >> 17, whole % (1 << 17)
        ym, day = ymd >> 5, ymd % 32
        date = f"{ym // 13:04d}-{ym % 13:02d}-{day:02d}"
        if field_type in (_DATE, _NEWDATE):
            return date
        return f"{date} {hms >> 12:02d}:{(hms >> 6) % 64:02d}:{hms % 64:02d}.{micro:06d}"
    return f"base64:type{field_type}:{base64.b64encode(raw).decode('ascii')}"


# -- partial updates (binlog_row_value_options=PARTIAL_JSON) --------------------------------
#
# A JSON column updated in place by JSON_SET, JSON_REPLACE or JSON_REMOVE is logged in the after
# image of a PARTIAL_UPDATE_ROWS event as a diff: the value's usual length prefix, then
# operations one after another, each an operation byte (0 REPLACE, 1 INSERT, 2 REMOVE), a
# length-coded path length and the path as text (`$.a[2]."b c"`), and but for REMOVE a
# length-coded value length and the value in binary JSON (a type byte and its data, as in a
# document). Applied in order to the before image's document they give the after document.
# Object members come out in MySQL's order for a stored document (by key length, then key
# bytes), so the text is what the server would have logged whole.

REPLACE, INSERT, REMOVE = 0, 1, 2
_OPERATIONS = {REPLACE: "replace", INSERT: "insert", REMOVE: "remove"}
_MAX_LEGS = 100  # as deep as a document can be


class JsonDiffError(ValueError):
    """A diff that cannot be read or applied; the message says why."""


def json_document(raw: bytes, decimal: DecimalDecoder) -> Any:
    """The document as Python values (dict, list, str, int, float, Decimal, bool, None)."""
    if not raw:
        return None
    return _value(raw[0], raw, 1, len(raw), 0, decimal)


def json_dump(value: Any) -> str:
    """A document as MySQL shows it (the same text `json_text` gives for its binary form)."""
    parts: list[str] = []
    _dump(value, parts)
    return "".join(parts)


def read_json_diff(diff: bytes, decimal: DecimalDecoder) -> list[tuple[int, str, Any]]:
    """The operations of a diff (without its length prefix): (operation, path, value)."""
    out: list[tuple[int, str, Any]] = []
    at, end = 0, len(diff)
    while at < end:
        operation = diff[at]
        if operation not in _OPERATIONS:
            raise JsonDiffError(f"unknown JSON diff operation {operation}")
        length, at = _lenenc(diff, at + 1)
        if at + length > end:
            raise JsonDiffError("a JSON diff path runs past the value")
        path = diff[at : at + length].decode("utf-8", "replace")
        at += length
        value = None
        if operation != REMOVE:
            length, at = _lenenc(diff, at)
            if at + length > end or length == 0:
                raise JsonDiffError("a JSON diff value runs past the value")
            try:
                value = _value(diff[at], diff, at + 1, at + length, 0, decimal)
            except (ValueError, IndexError, struct.error) as e:
                raise JsonDiffError(f"a JSON diff value cannot be read: {e}") from None
            at += length
        out.append((operation, path, value))
    return out


def describe_diff(operations: list[tuple[int, str, Any]]) -> str:
    """The operations as a line of text (for a note where they cannot be applied)."""
    parts = []
    for operation, path, value in operations:
        shown = "" if operation == REMOVE else " " + json_dump(value)
        parts.append(f"{_OPERATIONS[operation]} {path}{shown}")
    return "; ".join(parts)


def apply_json_diff(document: Any, operations: list[tuple[int, str, Any]]) -> Any:
    """The document after the operations, in order (JsonDiffError where one does not fit it)."""
    for operation, path, value in operations:
        legs = _path(path)
        if not legs:
            if operation != REPLACE:
                raise JsonDiffError(f"{_OPERATIONS[operation]} of the whole document")
            document = value
            continue
        parent = document
        for leg in legs[:-1]:
            parent = _step(parent, leg, path)
        last = legs[-1]
        if isinstance(parent, dict) and isinstance(last, str):
            if operation == REPLACE and last not in parent:
                raise JsonDiffError(f"replace of {path}, which the document has not")
            if operation == REMOVE:
                if last not in parent:
                    raise JsonDiffError(f"remove of {path}, which the document has not")
                del parent[last]
            else:
                parent[last] = value
                if operation == INSERT:  # a new member: MySQL keeps members by key length, then bytes
                    ordered = sorted(parent.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
                    parent.clear()
                    parent.update(ordered)
        elif isinstance(parent, list) and isinstance(last, int | tuple):
            index = _index(parent, last)
            if operation == INSERT:
                parent.insert(min(max(index, 0), len(parent)), value)
            elif not 0 <= index < len(parent):
                raise JsonDiffError(f"{_OPERATIONS[operation]} of {path}, past the end of the array")
            elif operation == REPLACE:
                parent[index] = value
            else:
                del parent[index]
        else:
            raise JsonDiffError(f"{path} does not lead into the document")
    return document


def _lenenc(data: bytes, at: int) -> tuple[int, int]:
    if at >= len(data):
        raise JsonDiffError("a JSON diff cut short")
    first = data[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or at + 1 + width > len(data):
        raise JsonDiffError("a bad length in a JSON diff")
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width


Leg = str | int | tuple[str, int]  # a member, an array index, or ("last", n) for [last - n]


def _path(path: str) -> list[Leg]:
    """The legs of a path as MySQL writes it in a diff: `$`, then `.key`, `."quoted key"` and
    `[n]` (and `[last]`, `[last - n]`); wildcards never occur in a diff and are refused."""
    if not path.startswith("$"):
        raise JsonDiffError(f"a JSON path not starting with $: {path[:80]!r}")
    legs: list[Leg] = []
    at, end = 1, len(path)
    while at < end:
        if len(legs) >= _MAX_LEGS:
            raise JsonDiffError("a JSON path too deep")
        ch = path[at]
        if ch == ".":
            at += 1
            if at < end and path[at] == '"':
                close = at + 1
                while close < end and path[close] != '"':
                    close += 2 if path[close] == "\\" else 1
                if close >= end:
                    raise JsonDiffError(f"an unterminated key in the JSON path {path[:80]!r}")
                try:
                    legs.append(json.loads(path[at : close + 1]))
                except ValueError:
                    raise JsonDiffError(f"a bad quoted key in the JSON path {path[:80]!r}") from None
                at = close + 1
            else:
                start = at
                while at < end and path[at] not in ".[":
                    at += 1
                key = path[start:at]
                if not key or key == "*" or key.startswith("*"):
                    raise JsonDiffError(f"a wildcard or empty key in the JSON path {path[:80]!r}")
                legs.append(key)
        elif ch == "[":
            close = path.find("]", at)
            if close < 0:
                raise JsonDiffError(f"an unterminated index in the JSON path {path[:80]!r}")
            inner = path[at + 1 : close].replace(" ", "")
            if inner.isdigit():
                legs.append(int(inner))
            elif inner == "last":
                legs.append(("last", 0))
            elif inner.startswith("last-") and inner[5:].isdigit():
                legs.append(("last", int(inner[5:])))
            else:
                raise JsonDiffError(f"an index MySQL does not write in a diff: {path[:80]!r}")
            at = close + 1
        else:
            raise JsonDiffError(f"a JSON path MySQL does not write in a diff: {path[:80]!r}")
    return legs


def _index(array: list, leg: int | tuple[str, int]) -> int:
    return leg if isinstance(leg, int) else len(array) - 1 - leg[1]


def _step(value: Any, leg: Leg, path: str) -> Any:
    if isinstance(value, dict) and isinstance(leg, str) and leg in value:
        return value[leg]
    if isinstance(value, list) and not isinstance(leg, str):
        index = _index(value, leg)
        if 0 <= index < len(value):
            return value[index]
    raise JsonDiffError(f"{path} does not lead into the document")
