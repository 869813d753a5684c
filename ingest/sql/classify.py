"""Classify a logged SQL string: statement type, tables, destructive, flags, fingerprint.

Pure Python (sqlglot, no Django); never raises on any input, since every log line reaches it.
Three bounded caches (verbatim text, literal-free key, statement shape) keep sqlglot to once a
shape. The decisions other parts rely on, and the caches: docs/architecture.md, "Classifying a
statement".
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, replace
from enum import Enum
from typing import TypeVar

from ingest.sql.lexer import (
    clean,
    fingerprint_of_key,
    finished_key,
    forget_keys,
    normalize_key,
    shape_of,
    split_statements,
    without_strings,
)
from ingest.sql.statements import MAX_PARSE, Analysis, Name, analyse

# Splitting a multi-statement string is linear, but a log line can be as long
# as max_allowed_packet (up to 1 GB); beyond this only the head is read.
_MAX_SCAN = 4 * 1024 * 1024
_CACHE_SIZE = 50_000  # entries per cache
_CACHE_CHARS = 16 * 1024 * 1024  # characters of keys per cache (statements are up to 64 KiB)

# The server folds these database names (and their table names) to lower case.
_FOLDED_DATABASES = frozenset({"information_schema"})
# Writing these is tampering with the logs themselves.
_LOG_TABLES = frozenset(
    {"mysql.general_log", "mysql.slow_log", "mysql.audit_log_filter", "mysql.audit_log_user", "mysql.*"}
)
# Writing the grant tables directly changes privileges without GRANT.
_GRANT_TABLES = frozenset(
    {
        "mysql.user",
        "mysql.global_priv",
        "mysql.db",
        "mysql.tables_priv",
        "mysql.columns_priv",
        "mysql.procs_priv",
        "mysql.proxies_priv",
        "mysql.roles_mapping",
        "mysql.role_edges",
        "mysql.default_roles",
        "mysql.global_grants",
        "mysql.*",
    }
)


@dataclass(frozen=True, slots=True)
class Classification:
    statement_type: str
    tables: tuple[str, ...]
    destructive: bool
    flags: frozenset[str]
    fingerprint: str
    targets: tuple[str, ...] = ()


_EMPTY = Classification("", (), False, frozenset(), "")


_Key = TypeVar("_Key", bound="tuple[str, str | None] | str")
_Value = TypeVar("_Value")


class _FifoCache(dict[_Key, _Value]):
    """A dict that forgets its oldest entries beyond _CACHE_SIZE entries or _CACHE_CHARS of keys.

    First in, first out: dicts keep insertion order, and a log's working set of
    shapes is small, so tracking recency (LRU) would buy little. The character
    budget keeps a log of long distinct statements from filling memory.
    """

    chars = 0

    def remember(self, key: _Key, value: _Value) -> None:
        with _LOCK:
            if key not in self:
                self.chars += _key_chars(key)
            self[key] = value
            while len(self) > _CACHE_SIZE or self.chars > _CACHE_CHARS:
                oldest = next(iter(self))
                self.chars -= _key_chars(oldest)
                del self[oldest]

    def forget(self) -> None:
        with _LOCK:
            self.clear()
            self.chars = 0


def _key_chars(key: tuple[str, str | None] | str) -> int:
    return len(key) if isinstance(key, str) else len(key[0])


class _Marker(Enum):
    """A one-member enum rather than a bare object(), so that `hit is _BY_TEXT` narrows types."""

    BY_TEXT = "by text"


_BY_TEXT = _Marker.BY_TEXT
# (key, database) -> Classification, or _BY_TEXT when that key's answer
# depends on literal values and must be worked out for each text.
_RESULTS: _FifoCache[tuple[str, str | None], Classification | _Marker] = _FifoCache()
# shape -> Analysis, shared by every database and every literal variant.
_ANALYSES: _FifoCache[str, Analysis] = _FifoCache()
_LOCK = threading.Lock()
# Verbatim repeats (pings, BEGIN/COMMIT, SET NAMES, an application's same
# query with the same values) are most of a busy log: a plain dict keyed by
# the logged string answers them before any string work.
_EXACT: dict[tuple[str, str | None], Classification] = {}
_EXACT_MAX_LEN = 1024


def clear_cache() -> None:
    """Forget every cached answer (benchmarks and tests)."""
    for cache in (_RESULTS, _ANALYSES):
        cache.forget()
    _EXACT.clear()
    forget_keys()


def classify(sql: str, database: str | None = None) -> Classification:
    """Classify `sql` as run with `database` as the current schema."""
    exact = (sql, database)
    known = _EXACT.get(exact)
    if known is not None:
        return known
    # Clean (as lexer.clean), compute the key, one or two dict lookups.
    text = sql.strip(" \t\r\n\f\v\x00;")
    if "\x00" in text:
        text = text.replace("\x00", " ")
    database = database or None
    if len(text) > MAX_PARSE:
        return _classify_long(text, database)
    stripped = without_strings(text)
    if stripped is None:  # comments or unusual quoted names: the full lexer
        key = normalize_key(text)
        hit = _RESULTS.get((key, database))
    else:
        # A statement whose only literals are strings is already its own key:
        # try that before scanning for numbers.
        hit = _RESULTS.get((stripped, database))
        if hit is not None:
            key = stripped
        else:
            key = finished_key(stripped)  # finish_key's, remembered by the digits' classes
            hit = _RESULTS.get((key, database))
    if hit is None or hit is _BY_TEXT:
        hit, sensitive = _classify_text(text, key, database)
        if "unclassifiable" in hit.flags:
            return hit
        # An answer that depends on literal values is not shared by key; the
        # verbatim cache below still keeps it for exact repeats.
        _RESULTS.remember((key, database), _BY_TEXT if sensitive else hit)
    if len(sql) <= _EXACT_MAX_LEN:
        if len(_EXACT) >= _CACHE_SIZE:
            _EXACT.clear()  # cheaper on this path than evicting one by one
        _EXACT[exact] = hit
    return hit


def fingerprint(sql: str) -> str:
    """pt-query-digest style fingerprint: literals -> ?, lists collapsed, comments gone, lower case."""
    return fingerprint_of_key(normalize_key(clean(sql)[:MAX_PARSE]))


_USE_RE = re.compile(
    r"""
    \s*(?:/\*.*?\*/\s*)*            # leading comments (drivers and proxies prepend them)
    use \s+
    (?: `(?P<quoted>(?:[^`]|``)+)`  # USE `my db`
      | (?P<bare>[^\s;`/\x00]+)     # USE shop
    )
    """,
    re.X | re.I | re.S,
)


def use_database(sql: str) -> str | None:
    """The database a `USE db` statement switches to, else None."""
    start = sql[:1] or " "
    if start not in "uU/#-( \t\r\n":  # cheap: nearly every statement starts with another letter
        return None
    m = _USE_RE.match(sql)
    if not m:
        return None
    if m.group("quoted") is not None:
        return m.group("quoted").replace("``", "`")
    return m.group("bare")


# --- the slow path -------------------------------------------------------------


def _analysis(text: str, key: str) -> Analysis:
    """The analysis of one statement, shared by shape unless it depends on literals."""
    if len(text) > MAX_PARSE:
        head = text[:MAX_PARSE]
        result = analyse(head, normalize_key(head), full=text)
        return replace(result, flags=result.flags | {"unparsed", "truncated"})
    shape = shape_of(key)
    cached = _ANALYSES.get(shape)
    if cached is not None:
        return cached
    result = analyse(text, key)
    if not result.literal_sensitive:
        _ANALYSES.remember(shape, result)
    return result


def _pieces(text: str, key: str) -> list[tuple[str, str]]:
    """(text, key) of each statement in `text`."""
    if ";" not in text or _is_compound(key):
        return [(text, key)]
    pieces = split_statements(text[:_MAX_SCAN])
    if len(pieces) == 1 and len(text) <= _MAX_SCAN:
        return [(text, key)]
    return [(p, normalize_key(p[:MAX_PARSE])) for p in pieces]


_COMPOUND_RE = re.compile(
    r"""
      CREATE \s+ (?:OR\s+REPLACE\s+)? (?:DEFINER\s*=\s*(?:`[^`]*`|[^\s`])+\s+)? (?:AGGREGATE\s+)?
      (?:PROCEDURE|FUNCTION|TRIGGER|EVENT|PACKAGE)\b
    | (?:[\w$]+\s*:\s*)? BEGIN\s+NOT\s+ATOMIC\b
    """,
    re.X | re.I,
)


def _is_compound(key: str) -> bool:
    # A stored program's body holds ";"-separated statements, but the server
    # receives and runs the whole definition as one statement.
    return _COMPOUND_RE.match(key) is not None


def _classify_text(text: str, key: str, database: str | None) -> tuple[Classification, bool]:
    """Classify cleaned `text`; True when the answer depends on its literal values."""
    try:
        return _classify_pieces(text, key, database)
    except Exception:
        # Log text must never stop an ingest. Each statement already falls back
        # to keyword rules when sqlglot surprises us (statements.analyse); this
        # is the last net, for a bug of ours: keep the statement, say so.
        flags = frozenset({"unparsed", "unclassifiable"})
        return Classification("UNKNOWN", (), False, flags, fingerprint_of_key(key)), False


def _classify_pieces(text: str, key: str, database: str | None) -> tuple[Classification, bool]:
    if not key:
        return _EMPTY, False  # empty, or only comments
    pieces = _pieces(text, key)
    analyses = [_analysis(t, k) for t, k in pieces if k]
    if not analyses:
        return Classification("", (), False, frozenset(), fingerprint_of_key(key)), False
    first = next((a for a in analyses if a.destructive), analyses[0])
    flags = {f for a in analyses for f in a.flags}
    if len(analyses) > 1:
        flags.add("multi_statement")
    if len(text) > _MAX_SCAN:
        flags.add("truncated")
    tables = _qualify([t for a in analyses for t in a.tables], database)
    targets = _qualify([t for a in analyses for t in a.targets], database)
    lowered = {t.lower() for t in targets}
    if lowered & _LOG_TABLES:
        flags.add("anti_forensic")
    if lowered & _GRANT_TABLES:
        flags.add("privilege_change")
    result = Classification(
        statement_type=first.statement_type,
        tables=tables,
        destructive=any(a.destructive for a in analyses),
        flags=frozenset(flags),
        fingerprint=fingerprint_of_key(key),
        targets=targets,
    )
    return result, any(a.literal_sensitive for a in analyses)


def _qualify(names: list[Name], database: str | None) -> tuple[str, ...]:
    out = set()
    for db, name in names:
        db = db or database
        if db is None:
            out.add(name)
        elif db.lower() in _FOLDED_DATABASES:
            out.add(f"{db}.{name}".lower())
        else:
            out.add(f"{db}.{name}")
    return tuple(sorted(out))


def _classify_long(text: str, database: str | None) -> Classification:
    """Statements over MAX_PARSE: read by keywords, not cached; fingerprinted by their head."""
    return _classify_text(text, normalize_key(text[:MAX_PARSE]), database)[0]
