"""Decoded binlog rows, cached: a page asked for again is not decoded again.

Policy: one entry per slice of one table change (the rows `skip` to `skip + take` of it), in
Django's "binlog_rows" cache (Redis, shared by the web workers), as the JSON text of the rows.
The key is the file's identity (path, size, SHA-256 of its head) with the positions the
metadata pass stored (table map, rows events), the slice, and the table's CREATE TABLE where
the names come from it: a binary log file never changes once written, so an entry is never
stale and is never invalidated; it expires after the cache's TIMEOUT (an hour unless
BINLOG_ROWS_CACHE_SECONDS says otherwise). Bounded: a slice whose JSON is over MAX_ENTRY_BYTES
is not stored, so 10,000 rows of large BLOBs do not fill Redis. With Redis down, rows are
decoded as if nothing were cached (logged once a minute at most), never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from django.core.cache import caches

from ingest.binlog.metadata import TableChange
from ingest.binlog.schema import TableSchema
from ingest.models import SourceFile

CACHE = "binlog_rows"
MAX_ENTRY_BYTES = 4 * 1024 * 1024
KEY_VERSION = 2  # bump when the rows' JSON changes shape (2: partial JSON applied, notes, VECTOR)

log = logging.getLogger(__name__)
_quiet_until = 0.0


def slice_key(
    source: SourceFile, change: TableChange, schema: TableSchema | None, skip: int, take: int
) -> str:
    """The entry of one slice of one table change of one file (see the module's policy)."""
    identity = [
        KEY_VERSION,
        source.path,
        source.size,
        source.head_sha256,
        change.table,
        change.change,
        change.table_map_position,
        change.positions,
        skip,
        take,
        repr(schema) if schema is not None else None,
    ]
    return "rows:" + hashlib.sha256(json.dumps(identity).encode()).hexdigest()


def cached_rows(
    source: SourceFile,
    change: TableChange,
    schema: TableSchema | None,
    skip: int,
    take: int,
    decode: Callable[[], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Rows `skip` to `skip + take` of `change`: from the cache, else `decode()` and kept."""
    key = slice_key(source, change, schema, skip, take)
    text = _call("get", key)
    if isinstance(text, str):
        return json.loads(text)
    rows = decode()
    text = json.dumps(rows, ensure_ascii=False)
    if len(text) <= MAX_ENTRY_BYTES:
        _call("set", key, text)
    return rows


def _call(method: str, *args: Any) -> Any:
    global _quiet_until
    try:
        return getattr(caches[CACHE], method)(*args)
    except Exception as e:  # Redis down or full: decode every time, do not fail the page
        if time.monotonic() >= _quiet_until:
            log.warning("binlog rows cache unavailable (%s): rows are decoded without it", e)
            _quiet_until = time.monotonic() + 60
        return None
