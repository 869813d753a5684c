"""The audit formats' short paths decide exactly what the full paths decide, item for item.

An audit log names the account, the outcome and a record or query number on every record, so
its records take neither of the general log's short paths. Two were made for them (issue 22):
`SessionTracker._named` (a record naming the account its connection already has) and
`CounterWatch.next_in_series` (a record counter one above the highest of the series last seen).
Every audit fixture log, and a log written here to reach what they must leave to the full
paths, run through the parsing process's stages (normalize.mysql_stages) with the short paths
and with them turned off (each sends every record to the full path); the outputs, and both
stages' states at every item taken, must be equal, and the short paths must have been taken.

No database.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from ingest.events import EventRecord
from ingest.normalize import CounterWatch, GapFinder, SessionTracker, mysql_stages
from ingest.parsers import by_name
from ingest.parsers.detect import detect_format
from ingest.parsers.records import Hints, Item
from tests.ingest.test_fused_stages import comparable, mysql_logs, watched

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
AUDIT_FORMATS = ("mariadb-audit", "json-audit", "xml-audit", "audit-csv")


def _logs() -> list[Path]:
    return mysql_logs((".py", ".md"), lambda fmt: fmt in AUDIT_FORMATS)


def _run(items: list[Item]) -> tuple[list[Any], list[Any], Any, Any]:
    tracker, gaps = SessionTracker("db1"), GapFinder()
    tracker.file = 1
    states: list[Any] = []
    source = watched(copy.deepcopy(items), tracker, gaps, states)
    shown = [comparable(o) for o in mysql_stages(source, tracker, gaps)]
    return shown, states, tracker.to_state(), gaps.to_state()


def _both(items: list[Item], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, dict[str, int]]:
    """(the full paths' run, the short paths' run, how often each short path was taken)."""
    taken = {"named": 0, "next": 0}
    named, next_in_series = SessionTracker._named, CounterWatch.next_in_series
    with monkeypatch.context() as m:
        m.setattr(SessionTracker, "_named", lambda self, record, when, session: self._full(record, when))
        m.setattr(CounterWatch, "next_in_series", lambda self, event: False)
        full = _run(items)

    def counted_named(self: SessionTracker, record: Any, when: Any, session: Any) -> EventRecord:
        taken["named"] += 1
        return named(self, record, when, session)

    def counted_next(self: CounterWatch, event: EventRecord) -> bool:
        done = next_in_series(self, event)
        taken["next"] += done
        return done

    with monkeypatch.context() as m:
        m.setattr(SessionTracker, "_named", counted_named)
        m.setattr(CounterWatch, "next_in_series", counted_next)
        short = _run(items)
    return full, short, taken


def _items(path: Path) -> list[Item]:
    data = path.read_bytes()
    fmt = detect_format(data[:1024])
    return list(by_name(fmt).parse(data.splitlines(keepends=True), hints=Hints(mtime_year=2026)))


@pytest.mark.parametrize("path", _logs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_audit_fixture_log_gives_the_same_items_and_states(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, short, _ = _both(_items(path), monkeypatch)
    assert short[0] == full[0]  # the same outputs, in the same order
    assert short[1] == full[1]  # the same states at each item taken
    assert short[2:] == full[2:]  # and at the end


def test_the_fixtures_take_both_short_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guard on the test above: the short paths are taken, in every audit format."""
    formats: dict[str, dict[str, int]] = {}
    for path in _logs():
        fmt = detect_format(path.read_bytes()[:1024])
        taken = _both(_items(path), monkeypatch)[2]
        seen = formats.setdefault(fmt, {"named": 0, "next": 0})
        seen["named"] += taken["named"]
        seen["next"] += taken["next"]
    assert set(formats) == set(AUDIT_FORMATS)
    assert all(seen["named"] for seen in formats.values())
    # Only the formats with a dense counter (Percona's RECORD, MySQL Enterprise's id) have one.
    assert all(formats[fmt]["next"] for fmt in ("json-audit", "xml-audit", "audit-csv"))


# server_audit, reaching what the short path must leave to the full one: a login, a refused one,
# a change of user (its QUERY records go on naming the old account: stale), a definer's table,
# statements of a routine logged before its CALL (query ids going back: in_routine), a failed
# statement, logging switched off and on, a secret, and a connection first seen mid-session.
SERVER_AUDIT = b"""\
20261125 10:00:00,db1,app,10.0.0.5,7,0,CONNECT,shop,,0
20261125 10:00:00,db1,app,10.0.0.5,7,1,QUERY,shop,'SELECT 1',0
20261125 10:00:00,db1,app,10.0.0.5,7,2,QUERY,shop,'DELETE FROM orders WHERE id = 4',0
20261125 10:00:01,db1,app,10.0.0.5,7,3,QUERY,shop,'SELECT nope FROM nowhere',1054
20261125 10:00:01,db1,eve,10.0.0.9,8,0,FAILED_CONNECT,,,1045
20261125 10:00:01,db1,root,localhost,9,5,QUERY,,'SET PASSWORD FOR \\'app\\' = PASSWORD(\\'hunter2\\')',0
20261125 10:00:02,db1,root,localhost,9,8,QUERY,shop,'DELETE FROM stock',0
20261125 10:00:02,db1,owner,localhost,9,7,WRITE,shop,stock,
20261125 10:00:02,db1,root,localhost,9,6,QUERY,shop,'CALL wipe()',0
20261125 10:00:02,db1,root,localhost,9,9,QUERY,shop,'SELECT 2',0
20261125 10:00:03,db1,app,10.0.0.5,7,4,QUERY,shop,'SET GLOBAL server_audit_logging = OFF',0
20261125 10:00:04,db1,app,10.0.0.5,7,5,QUERY,shop,'SET GLOBAL server_audit_logging = ON',0
20261125 10:00:04,db1,app,10.0.0.5,7,6,CHANGE_USER,shop,,0
20261125 10:00:04,db1,app,10.0.0.5,7,7,QUERY,shop,'SELECT 3',0
20261125 10:00:05,db1,app,10.0.0.5,7,8,QUERY,,'SELECT 4',0
20261125 10:00:05,db1,app,10.0.0.5,7,9,DISCONNECT,shop,,0
20261125 10:00:06,db1,bob,h,12,1,QUERY,shop,'SELECT 5',0
20261125 10:00:06,db1,carol,h,12,2,QUERY,shop,'SELECT 6',0
20261125 09:00:00,db1,bob,h,12,3,QUERY,shop,'SELECT 7',0
"""


# Percona's XML with a counter that skips, goes back, is filled late and starts a new run.
def _xml(record: str, second: str, cid: int, status: str, user: str, ip: str, sql: str) -> str:
    who = f'USER="{user}[{user}] @ h [{ip}]" HOST="h" IP="{ip}"'
    return (
        f'<AUDIT_RECORD NAME="Query" RECORD="{record}" TIMESTAMP="2026-11-25T{second} UTC"'
        f' CONNECTION_ID="{cid}" STATUS="{status}" {who} DB="shop" SQLTEXT="{sql}"/>\n'
    )


XML = (
    '<?xml version="1.0" encoding="utf-8"?>\n<AUDIT>\n'
    + _xml("1_2026-11-25T10:00:00", "10:00:00", 3, "0", "app", "10.0.0.1", "SELECT 1")
    + _xml("2_2026-11-25T10:00:00", "10:00:00", 3, "0", "app", "10.0.0.1", "SELECT 2")
    + _xml("5_2026-11-25T10:00:00", "10:00:01", 3, "0", "app", "10.0.0.1", "SELECT 5")
    + _xml("6_2026-11-25T10:00:00", "10:00:01", 3, "0", "app", "10.0.0.1", "SELECT 6")
    + _xml("3_2026-11-25T10:00:00", "10:00:01", 4, "0", "bob", "10.0.0.2", "SELECT 3")
    + _xml("7_2026-11-25T10:00:00", "10:00:02", 4, "0", "bob", "10.0.0.2", "SELECT 7")
    + _xml("8_2026-11-25T10:00:00", "10:00:02", 4, "1146", "bob", "10.0.0.2", "SELECT 8 FROM gone")
    + _xml("1_2026-11-25T11:00:00", "11:00:00", 4, "0", "bob", "10.0.0.2", "SELECT 9")
    + _xml("2_2026-11-25T11:00:00", "11:00:00", 4, "0", "bob", "10.0.0.2", "SELECT 10")
    + _xml("9_2026-11-25T10:00:00", "11:00:01", 4, "0", "bob", "10.0.0.2", "SELECT 11")
    + _xml("3_2026-11-25T11:00:00", "11:00:01", 4, "0", "bob", "10.0.0.2", "SELECT 12")
    + "</AUDIT>\n"
).encode()


@pytest.mark.parametrize("name, log", [("server_audit.log", SERVER_AUDIT), ("audit.xml", XML)])
def test_the_rare_paths_the_same_way(
    name: str, log: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / name
    path.write_bytes(log)
    items = _items(path)
    full, short, taken = _both(items, monkeypatch)
    assert short == full
    assert taken["named"]  # the common record took the short path...
    assert taken["named"] < sum(1 for s in full[0] if isinstance(s, tuple))  # ...and the rest did not
    kinds = {s[0] if isinstance(s, tuple) else s.split("(", 1)[0] for s in full[0]}
    assert {"event", "GapRecord"} <= kinds
    if name == "audit.xml":
        assert taken["next"] and any("sequence" in s for s in full[0] if isinstance(s, str))
    else:
        assert any("in_routine" in s for s in full[0] if isinstance(s, str))
