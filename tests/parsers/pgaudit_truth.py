"""Checks of parsed pgAudit logs against the scene's truth.json (shared by the fixture tests
and the live test, which plays the scene again)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ingest.parsers import pgaudit_csv, pgaudit_json, pgaudit_stderr
from ingest.parsers.records import Item, LogRecord, Problem

LAYOUTS = {"csv": pgaudit_csv, "json": pgaudit_json, "log": pgaudit_stderr}


def parse_file(path: Path) -> list[Item]:
    with path.open("rb") as f:
        return list(LAYOUTS[path.suffix.lstrip(".")].parse(f))


def check_against_truth(folder: Path, truth: dict[str, Any], layout: str) -> None:
    """Every statement the scene drove is in the layout's files as the server answered it, and
    nothing else is: see tests/fixtures/pgaudit_scene/regenerate.py for the story."""
    files = truth["files"][layout]
    sessions = truth["sessions"]
    records: list[tuple[int, LogRecord]] = []
    for n, name in enumerate(files, 1):
        items = parse_file(folder / name)
        assert not [i for i in items if isinstance(i, Problem)], name
        records += [(n, i) for i in items if isinstance(i, LogRecord)]
    ours = [(n, r) for n, r in records if r.extra.get("session") in sessions]
    queries = [(n, r) for n, r in ours if r.command == "Query"]
    expected = [s for s in truth["statements"] if s["audited"] is True or s["sqlstate"]]
    assert len(queries) == len(expected)
    for (n, record), statement in zip(queries, expected, strict=True):
        what = f"{layout} {statement['sql'][:60]!r}"
        assert n == statement["file"], what
        assert record.extra["session"] == statement["session"], what
        assert record.user == statement["user"] == sessions[statement["session"]]["user"], what
        assert record.database == "shop", what
        assert record.extra.get("application") == sessions[statement["session"]]["application"], what
        # pgAudit writes ALTER ROLE ... PASSWORD <REDACTED>; the rest as it was sent.
        sql = statement["logged_as"] or statement["sql"]
        if "PASSWORD" in sql and statement["audited"] is True:
            sql = sql[: sql.index("PASSWORD")] + "PASSWORD <REDACTED>"
        assert record.argument.decode() == sql, what
        if statement["sqlstate"]:
            assert record.status == (statement["sqlstate"] if layout != "log" else "error"), what
        else:
            assert record.status == "ok", what
        assert ("audited" not in record.extra) == (statement["audited"] is True), what
        assert set(statement["writes"]) <= set(record.objects), what
        given = json.loads(record.extra["parameters"]) if "parameters" in record.extra else None
        if not statement["logged_as"]:  # (sub-statements carry the function's arguments)
            assert given == statement["parameters"], what
        if (
            statement["rows"] is not None
            and "substatements" not in record.extra
            and statement["audited"] is True
        ):
            assert record.rows_affected == statement["rows"], what
    # Never in the audit log: what pgAudit was blinded to.
    texts = {r.argument.decode() for _, r in queries}
    for statement in truth["statements"]:
        if statement["audited"] is not True and not statement["sqlstate"]:
            assert statement["sql"] not in texts, statement["sql"]
    # Each session's login and logout, with who and from where.
    for session, who in sessions.items():
        connects = [r for _, r in ours if r.extra["session"] == session and r.command == "Connect"]
        quits = [r for _, r in ours if r.extra["session"] == session and r.command == "Quit"]
        assert [(r.user, r.database, r.host, r.status) for r in connects] == [
            (who["user"], who["database"], who["host"], "ok")
        ], session
        assert connects[0].extra["application"] == who["application"]
        assert len(quits) == 1, session
    refused = [r for _, r in records if r.command == "Connect" and r.status == "denied"]
    assert [r.user for r in refused] == [login["user"] for login in truth["refused_logins"]]
    configs = [r for _, r in records if r.command == "Config"]
    assert [r.extra["value"] for r in configs] == ["none", truth["config"]["pgaudit.log"].strip("'")]
