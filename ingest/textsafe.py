"""Text PostgreSQL can store, made from text a log (or a server we talk to) wrote. Pure: no Django.

PostgreSQL's text and jsonb refuse NUL and lone UTF-16 surrogates, and one such value used to
fail a whole batch on every poll. Evidence fields lose them (`displayable`), messages show them
as escapes (`storable`), checkpoints code them losslessly (`escape_json`, `CheckpointEncoder`).
Why three treatments: docs/architecture.md, "Text PostgreSQL refuses".
"""

from __future__ import annotations

import json
import re
from typing import Any

ESCAPE = "\ue000"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_ESCAPED = re.compile("[\x00\ud800-\udfff\ue000]")
_UNESCAPED = re.compile("\ue000([0-9a-f]{4})")
# What json.dumps writes (ensure_ascii) for a character escape_json must code: NUL, a surrogate
# (a valid pair is written as two surrogates: coding those too is harmless) or ESCAPE.
_NEEDS_CODING = re.compile(r"\\u(?:0000|d[89a-f]|e000)", re.IGNORECASE)


def unstorable(value: str) -> bool:
    """Whether PostgreSQL text would refuse `value`: it holds NUL or a lone surrogate. (ASCII text,
    nearly every value, can hold only the NUL: a substring test, a third of the regex's cost.)"""
    if value.isascii():
        return "\x00" in value
    return _UNSTORABLE.search(value) is not None


def storable(value: str) -> str:
    """`value` with each NUL and lone surrogate written as a visible escape (`\\x00`, `\\udc80`)."""
    if _UNSTORABLE.search(value) is None:
        return value
    return _UNSTORABLE.sub(lambda m: _visible(m.group()), value)


def _visible(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def displayable(value: str) -> str:
    """`value` as an evidence field shows it: NUL removed, a lone surrogate as U+FFFD."""
    if _UNSTORABLE.search(value) is None:
        return value
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", value)


def _code(text: str) -> str:
    return _ESCAPED.sub(lambda m: f"{ESCAPE}{ord(m.group()):04x}", text)


def _decode(text: str) -> str:
    return _UNESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)


def _walk(value: Any, change: Any) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {(change(k) if isinstance(k, str) else k): _walk(v, change) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, change) for v in value]
    return value


def escape_json(value: Any) -> Any:
    """`value` (JSON-able) with every string coded so that jsonb can hold it, reversibly."""
    return _walk(value, _code)


def unescape_json(value: Any) -> Any:
    """The value escape_json was given."""
    return _walk(value, _decode)


class CheckpointEncoder(json.JSONEncoder):
    """A JSONField encoder that codes what jsonb refuses (escape_json); plain data costs one scan."""

    def encode(self, o: Any) -> str:
        text = super().encode(o)
        if _NEEDS_CODING.search(text) is None and _ESCAPED.search(text) is None:
            return text
        return super().encode(escape_json(o))


class CheckpointDecoder(json.JSONDecoder):
    """The JSONField decoder of CheckpointEncoder's values."""

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        value = super().decode(s, *args, **kwargs)
        if ESCAPE not in s and "\\ue000" not in s.lower():
            return value
        return unescape_json(value)
