"""Stored procedures: what a CALL does, when the procedure's CREATE is in the logs.

Pure (no Django). `procedure_definition` reads `CREATE [DEFINER=...] PROCEDURE name(...)
[characteristics] body` and classifies the body (a `BEGIN ... END` block or one statement)
with the classifier; `called_procedure` names the procedure a `CALL` runs. The session
tracker keeps a server's procedures so that a CALL is marked with what its body does.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ingest.sql.classify import classify
from ingest.sql.renames import qualify_name

_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[\w$]+))?"
_CREATE = re.compile(
    rf"""
    ^\s*CREATE\s+(?:OR\s+REPLACE\s+)?
    (?:DEFINER\s*=\s*(?P<definer>(?:`[^`]*`|'[^']*'|[^\s@]+)(?:@(?:`[^`]*`|'[^']*'|\S+))?)\s+)?  # user@host
    PROCEDURE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>{_NAME})\s*
    \((?P<params>[^)]*)\)\s*                                                        # parameters
    (?:(?:COMMENT\s+'(?:[^']|'')*'|LANGUAGE\s+SQL|(?:NOT\s+)?DETERMINISTIC|CONTAINS\s+SQL
       |NO\s+SQL|READS\s+SQL\s+DATA|MODIFIES\s+SQL\s+DATA|SQL\s+SECURITY\s+(?P<security>\w+))\s*)*
    (?P<body>.+?)\s*;?\s*$
    """,
    re.IGNORECASE | re.DOTALL | re.VERBOSE,
)
_BLOCK = re.compile(r"^(?:\w+\s*:\s*)?BEGIN\b(?P<inner>.*)\bEND\b\s*\w*$", re.IGNORECASE | re.DOTALL)
_CALL = re.compile(rf"^\s*CALL\s+(?P<name>{_NAME})", re.IGNORECASE)
_DROP = re.compile(rf"^\s*DROP\s+PROCEDURE\s+(?:IF\s+EXISTS\s+)?(?P<name>{_NAME})", re.IGNORECASE)


class Routine(NamedTuple):
    destructive: bool
    tables: tuple[str, ...]
    # The account its body runs as: DEFINER (the default) runs as the definer, named by the
    # DEFINER clause (None: the account that created it); INVOKER runs as the caller.
    definer: str | None
    security: str


def account_name(text: str) -> str | None:
    """`admin`@`localhost`, 'admin'@'%' or admin@localhost as admin@localhost; None for
    CURRENT_USER (the creating account, which the caller knows)."""
    user, _, host = text.partition("@")
    user, host = user.strip("`'\""), host.strip("`'\"")
    if user.upper() in ("CURRENT_USER", "CURRENT_USER()") and not host:
        return None
    return f"{user}@{host}" if host else user


def procedure_definition(sql: str, database: str | None) -> tuple[str, Routine] | None:
    """(qualified name, what its body does) for a CREATE PROCEDURE; None for anything else."""
    m = _CREATE.match(sql)
    if m is None:
        return None
    body = m["body"].strip()
    block = _BLOCK.match(body)
    inner = block["inner"] if block else body
    name = qualify_name(m["name"], database)
    routine_db = name.rsplit(".", 1)[0] if "." in name else database
    c = classify(inner, routine_db)
    definer = account_name(m["definer"]) if m["definer"] else None
    security = (m["security"] or "DEFINER").upper()
    return name, Routine(c.destructive or "destructive_body" in c.flags, tuple(c.tables), definer, security)


def called_procedure(sql: str, database: str | None) -> str | None:
    m = _CALL.match(sql)
    return qualify_name(m["name"], database) if m else None


def dropped_procedure(sql: str, database: str | None) -> str | None:
    m = _DROP.match(sql)
    return qualify_name(m["name"], database) if m else None
