"""Oracle statements, as its audit trails write them: destructive, anti-forensic. Pure: no Django.

The trail names each statement's action itself (ACTION_NAME, or the XML file's action number),
so the action decides; the SQL text (comments removed, literals emptied, linear patterns) only
adds what an action name cannot say (ALTER TABLE ... DROP COLUMN, a DBMS_AUDIT_MGMT call) or
stands in where the record names no action. Never raises.

- destructive: every documented action that removes or overwrites rows or the objects holding
  them: DELETE, UPDATE, MERGE, TRUNCATE TABLE/CLUSTER, DROP TABLE/USER/TABLESPACE/CLUSTER/
  MATERIALIZED VIEW/PLUGGABLE DATABASE/DATABASE, PURGE TABLE/TABLESPACE/DBA_RECYCLEBIN/
  USER_RECYCLEBIN/RECYCLEBIN, FLASHBACK TABLE (back to an earlier SCN: the rows since are
  gone), FLASHBACK DATABASE; ALTER TABLE whose text drops or truncates a column or partition,
  sets columns unused, or exchanges a partition.
- anti_forensic: NOAUDIT (unified: a policy disabled; traditional: SYSTEM NOAUDIT, NOAUDIT
  OBJECT, NOAUDIT DEFAULT), DROP AUDIT POLICY, ALTER AUDIT POLICY ... DROP, DBMS_AUDIT_MGMT's
  CLEAN_AUDIT_TRAIL, CREATE_PURGE_JOB, SET_LAST_ARCHIVE_TIMESTAMP, SET_AUDIT_TRAIL_PROPERTY
  and DEINIT_CLEANUP, ALTER SYSTEM of an audit_* parameter, and DELETE/TRUNCATE/UPDATE of the
  trails' own tables (SYS.AUD$, SYS.FGA_LOG$, AUDSYS.*).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.oracle import Oracle
from sqlglot.errors import ErrorLevel

__all__ = ["DESTRUCTIVE_ACTIONS", "Verdict", "audit_change", "classify", "tables_named"]

DESTRUCTIVE_ACTIONS = frozenset(
    {
        "DELETE",
        "UPDATE",
        "MERGE",
        "UPSERT",
        "TRUNCATE TABLE",
        "TRUNCATE CLUSTER",
        "DROP TABLE",
        "DROP USER",
        "DROP TABLESPACE",
        "DROP CLUSTER",
        "DROP MATERIALIZED VIEW",
        "DROP PLUGGABLE DATABASE",
        "DROP DATABASE",
        "PURGE TABLE",
        "PURGE TABLESPACE",
        "PURGE TABLESPACE SET",
        "PURGE DBA_RECYCLEBIN",
        "PURGE USER_RECYCLEBIN",
        "PURGE RECYCLEBIN",
        "FLASHBACK TABLE",
        "FLASHBACK DATABASE",
    }
)
# Actions that turn auditing off or weaken it by themselves.
_ANTI_ACTIONS = frozenset(
    {"NOAUDIT", "SYSTEM NOAUDIT", "NOAUDIT OBJECT", "NOAUDIT DEFAULT", "DROP AUDIT POLICY"}
)
MAX_TEXT = 64 * 1024  # the patterns read this much of a statement (they are linear: a cap on work)

# Comments and literals ('...', q'[...]' is read as '...' up to its closing quote: enough to
# keep its content from being read as SQL in all but a quote inside the brackets).
_MASK_RE = re.compile(r"--[^\n]*+|/\*(?:[^*]|\*(?!/))*+\*/|'(?:[^']|'')*+'", re.S)
_WORD_RE = re.compile(r"[A-Za-z_][\w$#]*")
_ALTER_TABLE_LOSS = re.compile(
    r"\b(?:DROP\s+(?:COLUMN|PARTITION|SUBPARTITION|UNUSED\s+COLUMNS|COLUMNS\s+CONTINUE|\()"
    r"|TRUNCATE\s+(?:PARTITION|SUBPARTITION)|SET\s+UNUSED|EXCHANGE\s+(?:PARTITION|SUBPARTITION))",
    re.I,
)
_ALTER_POLICY_DROP = re.compile(r"\bDROP\b", re.I)
_AUDIT_MGMT = re.compile(
    r"\bDBMS_AUDIT_MGMT\s*\.\s*(?P<call>CLEAN_AUDIT_TRAIL|CREATE_PURGE_JOB|SET_LAST_ARCHIVE_TIMESTAMP"
    r"|SET_AUDIT_TRAIL_PROPERTY|DEINIT_CLEANUP|SET_PURGE_JOB_STATUS|SET_PURGE_JOB_INTERVAL)\b",
    re.I,
)
_AUDIT_PARAMETER = re.compile(r"\bSET\s+(?:\"?AUDIT_[A-Z_]+\"?|UNIFIED_AUDIT_[A-Z_]+)\s*=", re.I)
_TRAIL_TABLES = re.compile(r"\b(?:SYS\s*\.\s*)?(?:AUD\$|FGA_LOG\$)|\bAUDSYS\s*\.", re.I)
_POLICY_RE = re.compile(r"\bPOLICY\s+(?P<name>\"[^\"\n]{1,128}\"|[A-Za-z_][\w$#]{0,127})", re.I)


class _QuietParser(Oracle.Parser):  # type: ignore[misc,name-defined]  # sqlglot's dialect classes are untyped
    def _warn_unsupported(self) -> None:
        # A statement sqlglot keeps as an opaque Command names no table we can read; a warning
        # for each would flood a worker's log.
        return


_ORACLE = Oracle()


def _name(part: exp.Identifier | None) -> str:
    """A name as Oracle stores it: upper case unless it was quoted."""
    if part is None:
        return ""
    return part.name if part.quoted else part.name.upper()


def tables_named(sql: str) -> tuple[str, ...]:
    """The tables the text names (`SCHEMA.TABLE` as Oracle stores them; a bare name alone), by
    sqlglot's oracle dialect; () when sqlglot cannot read it or it is longer than MAX_TEXT."""
    if not sql or len(sql) > MAX_TEXT:
        return ()
    try:
        trees = _QuietParser(dialect=_ORACLE, error_level=ErrorLevel.RAISE).parse(_ORACLE.tokenize(sql), sql)
    except Exception:  # ParseError, TokenError, RecursionError: no table from the text
        return ()
    if len(trees) != 1 or trees[0] is None or isinstance(trees[0], exp.Command):
        return ()
    found = []
    for table in trees[0].find_all(exp.Table):
        if not table.name or isinstance(table.this, exp.Func):
            continue
        schema = _name(table.args.get("db"))
        found.append(f"{schema}.{_name(table.this)}" if schema else _name(table.this))
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True, slots=True)
class Verdict:
    statement_type: str  # the action: DELETE, DROP TABLE, TRUNCATE TABLE, ALTER TABLE, LOGON...
    destructive: bool
    flags: frozenset[str]  # "anti_forensic"


def masked(sql: str) -> str:
    """The text (its first MAX_TEXT characters) with comments removed and literals emptied."""
    return _MASK_RE.sub(lambda m: " " if m.group().startswith(("--", "/*")) else "''", sql[:MAX_TEXT])


def _action_of_text(bare: str) -> str:
    """An action name from the text, where the record names none (SYS audit records)."""
    words = [w.upper() for w in _WORD_RE.findall(bare[:512])]
    if not words:
        return ""
    first = words[0]
    if first in ("CREATE", "DROP", "ALTER", "TRUNCATE", "PURGE", "FLASHBACK") and len(words) > 1:
        second = words[1]
        if second in ("MATERIALIZED", "PLUGGABLE", "AUDIT", "PUBLIC") and len(words) > 2:
            return f"{first} {second} {words[2]}"
        if first == "CREATE" and second == "OR" and len(words) > 3:
            return f"CREATE {words[3]}"
        return f"{first} {second}"
    if first in ("BEGIN", "DECLARE", "CALL", "EXEC", "EXECUTE"):
        return "EXECUTE"
    if first == "WITH":
        return "SELECT"
    return first


def classify(action: str | None, sql: str) -> Verdict:
    """The verdict on one record: its ACTION_NAME (None or "" when the record names none) and
    its SQL_TEXT."""
    try:
        return _classify((action or "").strip().upper(), sql)
    except Exception:  # a bug of ours on a hostile text must not stop an ingest
        return Verdict((action or "UNKNOWN").upper()[:100], False, frozenset({"unparsed"}))


def _classify(action: str, sql: str) -> Verdict:
    bare = masked(sql)
    if not action or action == "UNKNOWN":
        action = _action_of_text(bare) or action
    destructive = action in DESTRUCTIVE_ACTIONS
    if action == "ALTER TABLE" and _ALTER_TABLE_LOSS.search(bare):
        destructive = True
    flags: set[str] = set()
    if (
        action in _ANTI_ACTIONS
        or (action == "ALTER AUDIT POLICY" and _ALTER_POLICY_DROP.search(bare))
        or _AUDIT_MGMT.search(bare)
        or (action == "ALTER SYSTEM" and _AUDIT_PARAMETER.search(bare))
        or (action in ("DELETE", "TRUNCATE TABLE", "UPDATE", "DROP TABLE") and _TRAIL_TABLES.search(bare))
    ):
        flags.add("anti_forensic")
    return Verdict(action[:100], destructive, frozenset(flags))


def audit_change(action: str, sql: str) -> tuple[str, str] | None:
    """What a statement does to auditing, for the gap finder: ("off", policy) for NOAUDIT [POLICY
    p], DROP AUDIT POLICY p, ALTER AUDIT POLICY p ... DROP; ("on", policy) for AUDIT POLICY p;
    ("purge", call) for a DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL call. The policy is "" for the
    traditional NOAUDIT/AUDIT statements (they name options, not a policy)."""
    action = (action or "").strip().upper()
    bare = masked(sql)
    m = _POLICY_RE.search(bare)
    name = m["name"] if m else ""
    policy = name[1:-1] if name.startswith('"') else name.upper()  # as Oracle stores the name
    if action in _ANTI_ACTIONS or (action == "ALTER AUDIT POLICY" and _ALTER_POLICY_DROP.search(bare)):
        return ("off", policy)
    if action in ("AUDIT", "SYSTEM AUDIT", "AUDIT OBJECT", "AUDIT DEFAULT", "CREATE AUDIT POLICY"):
        return ("on", policy)
    call = _AUDIT_MGMT.search(bare)
    if call is not None and call["call"].upper() == "CLEAN_AUDIT_TRAIL":
        return ("purge", "DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL")
    return None
