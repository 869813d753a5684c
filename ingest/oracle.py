"""Oracle servers after the session tracker: classification and the gaps the audit trail shows.

Pure Python (no Django). A file (or a pull) of a format whose `DIALECT` is "oracle" goes through
`classify_oracle_events` instead of normalize.classify_events, and the gap finder adds
`OracleWatch`'s rules. The rules themselves are ingest.dialects.oracle's; docs/architecture.md
"Oracle Unified Auditing" says why each is so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from ingest.dialects import oracle as rules
from ingest.events import EventRecord, FlagCorrection, GapRecord
from ingest.parsers.records import Problem
from ingest.sql import fingerprint
from ingest.sql.secrets import masked_raw, raw_may_hold_secret

__all__ = ["BIND_MASK", "OracleWatch", "classify_oracle_events", "masked_binds"]

BIND_MASK = "#*(*):*****"  # what replaces the binds of a statement that may hold a secret


def masked_binds(sql: str, binds: str | None) -> str | None:
    """SQL_BINDS as shown: masked whole when the statement may hold a secret (a password set,
    IDENTIFIED BY, a crypt or encode call...) the binds give the value of."""
    if not binds:
        return binds
    return BIND_MASK if raw_may_hold_secret(sql.encode("utf-8", "surrogateescape")) else binds


def classify_oracle_events(
    items: Iterable[EventRecord | Problem], routines: dict[str, list[Any]] | None = None
) -> Iterator[EventRecord | Problem | FlagCorrection]:
    """Statement type (the trail's action), tables (OBJECT_SCHEMA.OBJECT_NAME as Oracle writes
    it), destructive and flags of Oracle events (the tracker's output). `routines` is accepted
    for the same call as normalize.classify_events and not used: the trail audits what a
    procedure runs as records of their own."""
    for item in items:
        if isinstance(item, Problem):
            if raw_may_hold_secret(item.raw):
                item.raw = masked_raw(item.raw)
            yield item
            continue
        extra = item.extra or {}
        if item.command in ("Query", "Connect", "Quit"):
            verdict = rules.classify(extra.get("action_name"), item.sql)
            item.statement_type = verdict.statement_type
            item.destructive = verdict.destructive
            item.flags |= verdict.flags
            item.fingerprint = fingerprint(item.sql) if item.sql else ""
        if item.command == "Query":
            item.tables = _tables(extra, item.sql, item.statement_type)
            if extra.get("sql_binds") and masked_binds(item.sql, extra["sql_binds"]) != extra["sql_binds"]:
                item.flags.add("secret_masked")  # the raw bytes hold the binds: withheld like a secret
        yield item


# Actions whose object is a user, a policy, a package...: no table, whatever the text names.
_NO_TABLES_PREFIXES = (
    "CREATE USER",
    "ALTER USER",
    "DROP USER",
    "GRANT",
    "REVOKE",
    "AUDIT",
    "NOAUDIT",
    "LOGON",
)


def _tables(extra: dict[str, str], sql: str, action: str) -> tuple[str, ...]:
    """The object the trail names first (OBJECT_SCHEMA.OBJECT_NAME, as Oracle stores it), then
    the tables the text names that it is not (a MERGE's source, a subquery's): by sqlglot's
    oracle dialect, unqualified names qualified with the object's schema when it has one."""
    if action.startswith(_NO_TABLES_PREFIXES) or action in (
        "EXECUTE",
        "DROP AUDIT POLICY",
        "ALTER AUDIT POLICY",
    ):
        return ()  # (the object is a user, a policy, or the procedure or package run)
    schema, name = extra.get("object_schema"), extra.get("object_name")
    named = [f"{schema}.{name}"] if schema and name else []
    for table in rules.tables_named(sql):
        full = table if "." in table or not schema else f"{schema}.{table}"
        if full not in named and not (named and full.rsplit(".", 1)[-1] == named[0].rsplit(".", 1)[-1]):
            named.append(full)
    return tuple(named)


# -- gaps ------------------------------------------------------------------------------------------


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


class OracleWatch:
    """Where an Oracle trail shows that auditing did not record, as gaps.

    - NOAUDIT POLICY p, DROP AUDIT POLICY p, ALTER AUDIT POLICY p ... DROP (and the traditional
      NOAUDIT statements): "logging_off" for what policy p audited, from that record until
      AUDIT POLICY p (or CREATE AUDIT POLICY p) again, open until then. The other policies go on
      recording (the detail names the policy): the absence of a record of another kind is no
      proof of anything.
    - DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL: "purged": records before it (up to the last archive
      timestamp, if one was set) may have been deleted from the trail; from the unknown start
      to that call.
    A restart (STARTUP) is the tracker's banner: normalize.GapFinder makes its "restart" gap,
    whose detail says what queued mode loses. State (to_state) is plain data.
    """

    def __init__(self) -> None:
        self.off: dict[str, list[Any]] = {}  # policy -> [time, line, offset, sql]

    def to_state(self) -> dict[str, Any]:
        return {"off": {k: list(v) for k, v in self.off.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        self.off = {k: list(v) for k, v in (state.get("off") or {}).items()}

    def open_gaps(self) -> list[GapRecord]:
        """The gaps nothing has closed yet (open: no end)."""
        return [
            GapRecord("logging_off", _time(when), None, line, offset, _off_detail(policy, sql))
            for policy, (when, line, offset, sql) in self.off.items()
        ]

    def see(self, event: EventRecord) -> list[GapRecord]:
        if event.command != "Query" or "failed" in event.flags or not event.statement_type:
            return []
        change = rules.audit_change(event.statement_type, event.sql)
        if change is None:
            return []
        kind, what = change
        when = event.occurred_at
        if kind == "off":
            if what not in self.off and len(self.off) < 1000:
                self.off[what] = [_iso(when), event.line, event.offset, event.sql[:200]]
            return []
        if kind == "on":
            closed = self.off.pop(what, None)
            if closed is None:
                return []
            started, line, offset, sql = closed
            return [GapRecord("logging_off", _time(started), when, line, offset, _off_detail(what, sql))]
        detail = (
            f"{event.user or 'someone'} ran {what}: audit records written before it (up to the last"
            " archive timestamp, when one is set) may have been deleted from the trail"
        )
        return [GapRecord("purged", None, when, event.line, event.offset, detail)]


def _off_detail(policy: str, sql: str) -> str:
    what = f"audit policy {policy}" if policy else "the traditional audit options it names"
    return (
        f"auditing reduced by {sql[:200]!r}: what {what} recorded was not recorded until it was"
        " enabled again (other policies went on)"
    )
