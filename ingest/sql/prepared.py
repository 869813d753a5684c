"""SQL-level prepared statements: what an `EXECUTE name` runs, when its PREPARE is in the logs.

Pure (no Django). `PREPARE name FROM '<text>'` names a statement of its session;
`EXECUTE name [USING ...]` runs it; `DEALLOCATE PREPARE name` (or `DROP PREPARE`) forgets
it. The general log writes the statement the server ran after each of them (as `Prepare`
and `Execute` records), but the audit logs write only the EXECUTE: what it did is known
from the PREPARE of the same session. Names are case-insensitive (the server folds them).
"""

from __future__ import annotations

import re

from ingest.sql.lexer import DOUBLE_QUOTED, SINGLE_QUOTED, unquote_string

_NAME = r"(?:`(?P<quoted>(?:[^`]|``)+)`|(?P<bare>[\w$]+))"
_PREPARE = re.compile(
    rf"^\s*PREPARE\s+{_NAME}\s+FROM\s+(?:(?P<text>{SINGLE_QUOTED}|{DOUBLE_QUOTED})|@)",
    re.IGNORECASE | re.DOTALL,
)
_EXECUTE = re.compile(rf"^\s*EXECUTE\s+(?!IMMEDIATE\b){_NAME}", re.IGNORECASE)
_DEALLOCATE = re.compile(rf"^\s*(?:DEALLOCATE|DROP)\s+PREPARE\s+{_NAME}", re.IGNORECASE)


def _name(m: re.Match[str]) -> str:
    quoted = m["quoted"]
    return (quoted.replace("``", "`") if quoted is not None else m["bare"]).lower()


def prepared_text(sql: str) -> tuple[str, str | None] | None:
    """(name, statement text) of `PREPARE name FROM '...'`; the text is None for
    `PREPARE name FROM @variable` (the log does not show it). None for anything else."""
    m = _PREPARE.match(sql)
    if m is None:
        return None
    return _name(m), unquote_string(m["text"]) if m["text"] is not None else None


def executed_name(sql: str) -> str | None:
    """The name an `EXECUTE name [USING ...]` runs (not EXECUTE IMMEDIATE); else None."""
    m = _EXECUTE.match(sql)
    return _name(m) if m else None


def deallocated_name(sql: str) -> str | None:
    m = _DEALLOCATE.match(sql)
    return _name(m) if m else None
