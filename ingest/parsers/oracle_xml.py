"""Oracle's traditional XML audit files (`AUDIT_TRAIL = XML` or `XML, EXTENDED`). Pure: no Django.

The server writes one file per process under AUDIT_FILE_DEST: an XML declaration, an `<Audit>`
element (namespace dbserver_audittrail-11_2.xsd) with `<Version>`, then `<AuditRecord>`
elements, one after another, each holding its fields as child elements (`<Session_Id>`,
`<Extended_Timestamp>`, `<DB_User>`, `<Action>`, `<Sql_Text>`...). A file still being written
has no `</Audit>`, so each record is found by a scanner and parsed alone with ElementTree; a
record that holds a DTD or an entity declaration (`<!`) is refused, so no entity is expanded.
The fields are renamed to UNIFIED_AUDIT_TRAIL's columns and read by oracle_audit.row_record;
`<Action>` is a number of AUDIT_ACTIONS, named here (ACTIONS).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator

from ingest.parsers.oracle_audit import DIALECT, MAX_RECORD_BYTES, row_record, time_digits
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, Problem, checked_integers

__all__ = ["ACTIONS", "DIALECT", "LABEL", "NAME", "parse", "recognise", "time_digits"]

NAME = "oracle-xml"
LABEL = "Oracle XML audit file (AUDIT_TRAIL=XML)"

_OPEN = b"<AuditRecord>"
_CLOSE = b"</AuditRecord>"

# The XML elements, as the unified trail's columns (Oracle Database Security Guide, "Oracle
# Database Audit Trail XML schema"; Database Reference, DBA_COMMON_AUDIT_TRAIL for the codes).
FIELDS = {
    "Audit_Type": "AUDIT_TYPE",
    "Session_Id": "SESSIONID",
    "Proxy_SessionId": "PROXY_SESSIONID",
    "StatementId": "STATEMENT_ID",
    "EntryId": "ENTRY_ID",
    "Extended_Timestamp": "EVENT_TIMESTAMP_UTC",
    "DB_User": "DBUSERNAME",
    "OS_User": "OS_USERNAME",
    "Userhost": "USERHOST",
    "OS_Process": "OS_PROCESS",
    "Terminal": "TERMINAL",
    "Instance_Number": "INSTANCE_ID",
    "Object_Schema": "OBJECT_SCHEMA",
    "Object_Name": "OBJECT_NAME",
    "Returncode": "RETURN_CODE",
    "Scn": "SCN",
    "TransactionId": "TRANSACTION_ID",
    "Sql_Text": "SQL_TEXT",
    "Sql_Bind": "SQL_BINDS",
    "DBID": "DBID",
    "Current_User": "CURRENT_USER",
    "Client_Id": "CLIENT_IDENTIFIER",
    "Comment_Text": "AUTHENTICATION_TYPE",  # "Authenticated by: ...; Client address: (ADDRESS=...(HOST=...))"
    "Priv_Used": "SYSTEM_PRIVILEGE_USED",
}

# AUDIT_ACTIONS: the number the XML file writes in <Action>, and its name (ACTION_NAME).
ACTIONS = {
    0: "UNKNOWN", 1: "CREATE TABLE", 2: "INSERT", 3: "SELECT", 4: "CREATE CLUSTER", 5: "ALTER CLUSTER",
    6: "UPDATE", 7: "DELETE", 8: "DROP CLUSTER", 9: "CREATE INDEX", 10: "DROP INDEX", 11: "ALTER INDEX",
    12: "DROP TABLE", 13: "CREATE SEQUENCE", 14: "ALTER SEQUENCE", 15: "ALTER TABLE", 16: "DROP SEQUENCE",
    17: "GRANT OBJECT", 18: "REVOKE OBJECT", 19: "CREATE SYNONYM", 20: "DROP SYNONYM", 21: "CREATE VIEW",
    22: "DROP VIEW", 24: "CREATE PROCEDURE", 25: "ALTER PROCEDURE", 26: "LOCK", 28: "RENAME",
    29: "COMMENT", 30: "AUDIT OBJECT", 31: "NOAUDIT OBJECT", 32: "CREATE DATABASE LINK",
    33: "DROP DATABASE LINK", 34: "CREATE DATABASE", 35: "ALTER DATABASE", 39: "CREATE TABLESPACE",
    40: "ALTER TABLESPACE", 41: "DROP TABLESPACE", 42: "ALTER SESSION", 43: "ALTER USER", 44: "COMMIT",
    45: "ROLLBACK", 46: "SAVEPOINT", 47: "PL/SQL EXECUTE", 48: "SET TRANSACTION", 49: "ALTER SYSTEM",
    51: "CREATE USER", 52: "CREATE ROLE", 53: "DROP USER", 54: "DROP ROLE", 55: "SET ROLE",
    59: "CREATE TRIGGER", 60: "ALTER TRIGGER", 61: "DROP TRIGGER", 62: "ANALYZE TABLE",
    68: "DROP PROCEDURE", 74: "CREATE MATERIALIZED VIEW", 75: "ALTER MATERIALIZED VIEW",
    76: "DROP MATERIALIZED VIEW", 79: "ALTER ROLE", 85: "TRUNCATE TABLE", 86: "TRUNCATE CLUSTER",
    88: "ALTER VIEW", 91: "CREATE FUNCTION", 92: "ALTER FUNCTION", 93: "DROP FUNCTION",
    94: "CREATE PACKAGE", 95: "ALTER PACKAGE", 96: "DROP PACKAGE", 97: "CREATE PACKAGE BODY",
    98: "ALTER PACKAGE BODY", 99: "DROP PACKAGE BODY", 100: "LOGON", 101: "LOGOFF",
    102: "LOGOFF BY CLEANUP", 103: "SESSION REC", 104: "SYSTEM AUDIT", 105: "SYSTEM NOAUDIT",
    106: "AUDIT DEFAULT", 107: "NOAUDIT DEFAULT", 108: "SYSTEM GRANT", 109: "SYSTEM REVOKE",
    114: "GRANT ROLE", 115: "REVOKE ROLE", 116: "EXECUTE PROCEDURE", 128: "FLASHBACK",
    129: "CREATE SESSION", 189: "MERGE", 197: "PURGE USER_RECYCLEBIN", 198: "PURGE DBA_RECYCLEBIN",
    199: "PURGE TABLESPACE", 200: "PURGE TABLE", 201: "PURGE INDEX", 202: "UNDROP OBJECT",
    204: "FLASHBACK DATABASE", 205: "FLASHBACK TABLE",
}  # fmt: skip

# What stands outside the records: space, the declaration, `<Audit` with its attributes (over
# several lines: each piece alone), `</Audit>`, `<Version>`. Possessive: it never backtracks.
_BETWEEN = re.compile(
    rb"""(?:\s++|<\?xml[^>]{0,200}\?>|<Audit\b|[\w:.-]{1,64}="[^"<>]{0,500}"|>|</Audit>
    |<Version>[^<]{0,40}</Version>)*+""",
    re.X,
)


def structure(line: bytes) -> bool:
    """Whether a line is the file's own envelope, no record: declaration, <Audit>, <Version>."""
    return _BETWEEN.fullmatch(line) is not None


def recognise(head: bytes) -> bool:
    """An XML audit file: `<Audit` of the dbserver_audittrail schema, or an `<AuditRecord>`."""
    body = head[:4096].lstrip(b"\xef\xbb\xbf").lstrip()
    return body[:1] == b"<" and (b"dbserver_audittrail" in body or _OPEN in body)


def _fields(element: ET.Element) -> dict[str, object]:
    row: dict[str, object] = {}
    for child in element:
        tag = child.tag.rpartition("}")[2]  # (records parsed alone carry no namespace)
        name = FIELDS.get(tag)
        if name is None:
            row[tag.upper()] = child.text
            continue
        row[name] = child.text
    action = element.findtext("Action")
    if action is not None:
        code = action.strip()
        row["ACTION_NAME"] = (
            ACTIONS.get(int(code), f"ACTION {code}") if code.isdigit() and len(code) < 6 else code
        )
    if row.get("DBUSERNAME") == "/":  # an operating-system login (AS SYSDBA): the OS user is who
        row["DBUSERNAME"] = None
    return row


def xml_record(raw: bytes, offset: int, line: int) -> Item:
    if b"<!" in raw:
        return Problem(
            line, offset, raw[:PROBLEM_EXCERPT_BYTES], "a record holding a DTD or declaration is refused"
        )
    try:
        element = ET.fromstring(raw)
    except ET.ParseError as error:
        return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], f"not well-formed XML: {error}")
    return row_record(_fields(element), line=line, offset=offset, raw=raw)


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: object | None = None
) -> Iterator[Item]:
    """Every record and problem of an XML audit file, in order (hints: none needed).

    1. Outside a record, only the envelope (declaration, `<Audit>`, `<Version>`) and space may
       stand: anything else up to the next `<AuditRecord>` is one Problem.
    2. A record runs from `<AuditRecord>` to its `</AuditRecord>` (and the line end after it);
       another `<AuditRecord>` before that end makes it a Problem (cut short), over
       MAX_RECORD_BYTES too.
    """
    yield from checked_integers(_parse(lines, start_offset, start_line))


def _parse(lines: Iterable[bytes], offset: int, line: int) -> Iterator[Item]:
    record: list[bytes] | None = None
    size, at, too_long = 0, (0, 0), False
    junk: list[bytes] = []
    junk_at = (0, 0)
    for chunk in lines:
        pos = 0
        while pos < len(chunk):
            if record is None:
                start = chunk.find(_OPEN, pos)
                stop = len(chunk) if start < 0 else start
                rest = chunk[pos:stop]
                if _BETWEEN.fullmatch(rest) is None or junk:
                    if not junk:
                        junk_at = (offset + pos, line)
                    if sum(map(len, junk)) < PROBLEM_EXCERPT_BYTES:
                        junk.append(rest)
                if start < 0:
                    break
                if junk and b"".join(junk).strip():
                    yield Problem(
                        junk_at[1], junk_at[0], b"".join(junk)[:PROBLEM_EXCERPT_BYTES], "not an audit record"
                    )
                junk = []
                record, size, at, too_long = [], 0, (offset + start, line), False
                pos = start
            # (Past this record's own `<AuditRecord>` when it opens in this chunk.)
            skip = len(_OPEN) if chunk.startswith(_OPEN, pos) and not record else 0
            end = chunk.find(_CLOSE, pos + skip)
            again = chunk.find(_OPEN, pos + skip)
            if again >= 0 and (end < 0 or again < end):
                yield Problem(
                    at[1],
                    at[0],
                    b"".join([*record, chunk[pos:again]])[:PROBLEM_EXCERPT_BYTES],
                    "record cut short",
                )
                record = None
                pos = again
                continue
            stop = len(chunk) if end < 0 else end + len(_CLOSE)
            if end >= 0 and chunk[stop:].strip() == b"":
                stop = len(chunk)  # the line end after the record is the record's
            piece = chunk[pos:stop]
            size += len(piece)
            if size <= MAX_RECORD_BYTES:
                record.append(piece)
            else:
                too_long = True
            pos = stop
            if end >= 0:
                raw = b"".join(record)
                record = None
                if too_long:
                    yield Problem(
                        at[1],
                        at[0],
                        raw[:PROBLEM_EXCERPT_BYTES],
                        f"record longer than {MAX_RECORD_BYTES} bytes",
                    )
                else:
                    yield xml_record(raw, *at)
        offset += len(chunk)
        line += chunk.count(b"\n")
    if record is not None:
        yield Problem(at[1], at[0], b"".join(record)[:PROBLEM_EXCERPT_BYTES], "unfinished record at the end")
    elif junk and b"".join(junk).strip():
        yield Problem(junk_at[1], junk_at[0], b"".join(junk)[:PROBLEM_EXCERPT_BYTES], "not an audit record")
