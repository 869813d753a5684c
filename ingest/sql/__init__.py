"""SQL statement classification for logged MySQL/MariaDB statements (no Django)."""

from __future__ import annotations

from ingest.sql.classify import Classification, classify, clear_cache, fingerprint, use_database
from ingest.sql.statements import log_switches

__all__ = ["Classification", "classify", "clear_cache", "fingerprint", "log_switches", "use_database"]
