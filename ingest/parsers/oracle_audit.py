"""Oracle audit trails: what the three export layouts and the live pull share. Pure: no Django.

One row of UNIFIED_AUDIT_TRAIL (or one `<AuditRecord>` of the traditional XML audit file, its
fields renamed to the unified columns by oracle_xml) becomes one record, by `row_record`:

- ACTION_NAME `LOGON` -> Connect (status "denied" when RETURN_CODE is not 0: ORA-01017 and the
  like), `LOGOFF` / `LOGOFF BY CLEANUP` -> Quit, `STARTUP` -> ServerStart (the instance started:
  queued records of the boot before may be lost), anything else -> Query;
- who: DBUSERNAME (the record names it on every row), USERHOST, the client address's HOST= of
  AUTHENTICATION_TYPE as the ip; OS_USERNAME and CLIENT_PROGRAM_NAME go to the session;
- the connection: SESSIONID (the audit session id, unique in the database, RAC included);
- the statement: SQL_TEXT (the argument), OBJECT_SCHEMA.OBJECT_NAME (the object, as Oracle
  writes it: upper case unless created quoted), RETURN_CODE (0 = ok, else the ORA- number);
- kept in `extra` for the classifier and the event page: ACTION_NAME, SCN, TRANSACTION_ID,
  CURRENT_USER, DBPROXY_USERNAME, SQL_BINDS, UNIFIED_AUDIT_POLICIES, DBID, INSTANCE_ID,
  ENTRY_ID, STATEMENT_ID and the rest of the documented columns the row has.

Times: EVENT_TIMESTAMP_UTC first (UTC), else EVENT_TIMESTAMP (the session's zone: the source's
time zone applies), as SQLcl prints them under the default NLS_TIMESTAMP_FORMAT
(`DD-MON-RR HH.MI.SSXFF AM`, English month names), as ISO 8601 (an export made after
`ALTER SESSION SET NLS_TIMESTAMP_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.FF6'`, which we advise: RR
is a two-digit year) or as the XML file's `2026-11-25T04:16:34.123456Z`.
See docs/architecture.md "Oracle Unified Auditing" and docs/formats.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, LogRecord, Problem, ServerStart

__all__ = [
    "COLUMNS",
    "DIALECT",
    "MAX_RECORD_BYTES",
    "NATURAL_KEY",
    "parse_time",
    "row_record",
    "time_digits",
]

# The SQL a server of these formats runs is Oracle's: ingest.dialects.oracle classifies it.
DIALECT = "oracle"
# A record holds at most this many bytes (SQL_TEXT is a CLOB: a hostile or huge statement is a
# Problem, not a stall); the exports' scanners and the pull check it before a row is read.
MAX_RECORD_BYTES = 8 << 20

# The documented columns of UNIFIED_AUDIT_TRAIL that AuditWeb reads (Oracle Database Reference,
# "UNIFIED_AUDIT_TRAIL"); an export may hold any subset in any order, and others are kept as is.
COLUMNS = (
    "EVENT_TIMESTAMP_UTC",
    "EVENT_TIMESTAMP",
    "DBID",
    "INSTANCE_ID",
    "SESSIONID",
    "ENTRY_ID",
    "STATEMENT_ID",
    "AUDIT_TYPE",
    "DBUSERNAME",
    "CURRENT_USER",
    "DBPROXY_USERNAME",
    "OS_USERNAME",
    "USERHOST",
    "TERMINAL",
    "CLIENT_PROGRAM_NAME",
    "AUTHENTICATION_TYPE",
    "ACTION_NAME",
    "RETURN_CODE",
    "OBJECT_SCHEMA",
    "OBJECT_NAME",
    "SQL_TEXT",
    "SQL_BINDS",
    "SCN",
    "TRANSACTION_ID",
    "UNIFIED_AUDIT_POLICIES",
    "SYSTEM_PRIVILEGE_USED",
    "CLIENT_IDENTIFIER",
    "OS_PROCESS",
)
# What makes one row of the trail itself: the pull de-duplicates on it (ingest.oracle_table).
NATURAL_KEY = ("DBID", "INSTANCE_ID", "SESSIONID", "ENTRY_ID", "STATEMENT_ID", "EVENT_TIMESTAMP_UTC")
# Kept in extra (lower-case keys) for the classifier (ingest.oracle) and the event page.
_KEPT = (
    "ACTION_NAME",
    "SCN",
    "TRANSACTION_ID",
    "CURRENT_USER",
    "DBPROXY_USERNAME",
    "SQL_BINDS",
    "UNIFIED_AUDIT_POLICIES",
    "DBID",
    "INSTANCE_ID",
    "ENTRY_ID",
    "STATEMENT_ID",
    "AUDIT_TYPE",
    "RETURN_CODE",
    "OBJECT_SCHEMA",
    "OBJECT_NAME",
    "SYSTEM_PRIVILEGE_USED",
    "CLIENT_IDENTIFIER",
    "TERMINAL",
    "OS_PROCESS",
)
_QUIT = frozenset({"LOGOFF", "LOGOFF BY CLEANUP"})

_MONTHS = {
    m: i
    for i, m in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1
    )
}
# `25-NOV-26 04.16.34.123456000 AM` (DD-MON-RR HH.MI.SSXFF AM), a 4-digit year too (DD-MON-RRRR);
# a zone region or offset after it (TIMESTAMP WITH TIME ZONE's TZR) is read when numeric.
_NLS_RE = re.compile(
    r"""
    (?P<day>\d{1,2})-(?P<mon>[A-Za-z]{3})-(?P<year>\d{2}|\d{4})[ ]
    (?P<h>\d{1,2})[.:](?P<m>\d{2})[.:](?P<s>\d{2})(?:[.,](?P<frac>\d{1,9}))?
    (?:[ ](?P<ampm>AM|PM|am|pm))?
    (?:[ ](?P<zone>UTC|GMT|Z|[+-]\d{2}:\d{2}))?
    \Z
    """,
    re.X,
)
# ISO 8601: `2026-11-25 04:16:34.123456`, `2026-11-25T04:16:34.123456Z`, with an offset too.
_ISO_RE = re.compile(
    r"""
    (?P<date>\d{4}-\d{2}-\d{2})[ T]
    (?P<clock>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,9}))?
    [ ]?(?P<zone>Z|UTC|[+-]\d{2}:?\d{2})?
    \Z
    """,
    re.X,
)
_HOST_RE = re.compile(r"\(HOST=(?P<host>[0-9A-Fa-f.:]{2,45})\)")


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds the first record's time shows (SQLcl prints 9 for a TIMESTAMP
    under the default format, the XML file 6); None when the head shows no time."""
    m = re.search(rb"\d{2}[.:]\d{2}[.:]\d{2}[.,](\d{1,9})", head[:4096])
    return len(m[1]) if m else None


def parse_time(text: str | None, *, utc: bool) -> datetime | None:
    """A time as SQLcl or the XML file write it (see the module's docstring); aware (UTC) when
    `utc` or the text names UTC or an offset, else naive; None when it is no time."""
    if not text:
        return None
    text = text.strip()
    if len(text) > 64:
        return None
    m = _NLS_RE.match(text)
    try:
        if m is not None:
            month = _MONTHS.get(m["mon"].upper())
            if month is None:
                return None
            year = int(m["year"])
            if len(m["year"]) == 2:  # RR: 00-49 this century, 50-99 the last (Oracle's rule)
                year += 2000 if year < 50 else 1900
            hour = int(m["h"])
            if m["ampm"]:
                if not 1 <= hour <= 12:
                    return None
                hour = hour % 12 + (12 if m["ampm"].upper() == "PM" else 0)
            micro = int((m["frac"] or "0")[:6].ljust(6, "0"))
            when = datetime(year, month, int(m["day"]), hour, int(m["m"]), int(m["s"]), micro)
            zone = m["zone"]
        else:
            m = _ISO_RE.match(text)
            if m is None:
                return None
            frac = (m["frac"] or "")[:6]
            when = datetime.fromisoformat(
                f"{m['date']}T{m['clock']}{'.' + frac.ljust(6, '0') if frac else ''}"
            )
            zone = m["zone"]
    except ValueError:
        return None
    if zone and zone not in ("Z", "UTC", "GMT"):
        offset = datetime.fromisoformat(f"2000-01-01T00:00:00{zone[:3]}:{zone[-2:]}").utcoffset()
        assert offset is not None
        return (when - offset).replace(tzinfo=UTC)
    if zone or utc:
        return when.replace(tzinfo=UTC)
    return when


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    if text.endswith(".0"):  # a NUMBER some tools print with a decimal point
        text = text[:-2]
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else None


def _text(value: object) -> str | None:
    """A field's text: None for NULL (absent, JSON null, an empty CSV field)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    if text == "":
        return None
    return text


def row_record(
    row: Mapping[str, object], *, line: int, offset: int, raw: bytes
) -> LogRecord | ServerStart | Problem:
    """The record of one trail row (column names in any case; values as text, numbers or None)."""
    fields = {str(k).upper(): _text(v) for k, v in row.items()}
    get = fields.get
    when = parse_time(get("EVENT_TIMESTAMP_UTC"), utc=True)
    if when is None:
        when = parse_time(get("EVENT_TIMESTAMP"), utc=False)
    if when is None:
        shown = get("EVENT_TIMESTAMP_UTC") or get("EVENT_TIMESTAMP")
        return Problem(
            line,
            offset,
            raw[:PROBLEM_EXCERPT_BYTES],
            f"no readable EVENT_TIMESTAMP_UTC or EVENT_TIMESTAMP ({(shown or 'absent')[:80]!r})",
        )
    action = (get("ACTION_NAME") or "").strip().upper()
    if action == "STARTUP":
        return ServerStart(
            line, offset, raw, f"Oracle instance STARTUP (instance {get('INSTANCE_ID') or '?'})"
        )
    code = _int(get("RETURN_CODE"))
    if action == "LOGON":
        command = "Connect"
    elif action in _QUIT:
        command = "Quit"
    else:
        command = "Query"
    status = None if get("RETURN_CODE") is None else ("ok" if code == 0 else str(code or get("RETURN_CODE")))
    if command == "Connect" and status not in (None, "ok"):
        status = "denied"
    extra = {k.lower(): v for k in _KEPT if (v := get(k)) is not None}
    if get("OS_USERNAME"):
        extra["os_user"] = get("OS_USERNAME") or ""
    if get("CLIENT_PROGRAM_NAME"):
        extra["program_name"] = get("CLIENT_PROGRAM_NAME") or ""
    if command == "Connect" and code:
        extra["error"] = f"ORA-{code:05d}"
    auth = get("AUTHENTICATION_TYPE") or ""
    host_m = _HOST_RE.search(auth[:4096])
    schema, name = get("OBJECT_SCHEMA"), get("OBJECT_NAME")
    objects = (f"{schema}.{name}",) if schema and name else ((name,) if name else ())
    sql = get("SQL_TEXT") or ""
    return LogRecord(
        line=line,
        offset=offset,
        raw=raw,
        occurred_at=when,
        connection_id=_int(get("SESSIONID")),
        command=command,
        argument=sql.encode("utf-8", "surrogateescape"),
        user=get("DBUSERNAME"),
        host=get("USERHOST"),
        ip=host_m["host"] if host_m else None,
        database=None,  # Oracle's trail names no current schema: tables are schema-qualified
        status=status,
        extra=extra,
        objects=objects,
    )
