"""The parsing process's one loop (normalize.mysql_stages) decides exactly what the three stages
decide one after the other (tracker, classifier, gap finder), item for item.

No database: every MySQL/MariaDB fixture log, and logs written here to reach the rare paths
(banners held and settled, a pause, a change of user, transactions rolled back, logging
switched off and on, secrets, the clock going back), run both ways from fresh stages; the
outputs, and both stages' states at every item taken from the input, must be equal.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.events import EventRecord
from ingest.normalize import SETTLE, GapFinder, SessionTracker, Settle, classify_events, mysql_stages
from ingest.parsers import by_name, dialect_of
from ingest.parsers.detect import detect_format
from ingest.parsers.records import Hints, Item

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def mysql_logs(skipped: tuple[str, ...], wanted: Callable[[str], bool]) -> list[Path]:
    """The fixture logs of a MySQL/MariaDB format that `wanted` takes (by name), but files whose
    suffix is one of `skipped` and binary logs."""
    found = []
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or path.suffix in skipped or "bin." in path.name:
            continue
        try:
            fmt = detect_format(path.read_bytes()[:1024])
        except ValueError:
            continue
        if dialect_of(fmt) == "mysql" and wanted(fmt):
            found.append(path)
    return found


def _logs() -> list[Path]:
    return mysql_logs((".py", ".json", ".md"), lambda fmt: fmt != "binlog")


def comparable(out: object) -> object:
    """What a stage's output says, comparable (the session by its key and account)."""
    if isinstance(out, EventRecord):
        s = out.session
        return (
            "event", out.occurred_at, s.key, s.user, s.host, s.program, s.os_user, out.connection_id,
            out.user, out.host, out.ip, out.database, out.command, out.sql, out.raw, out.line,
            out.offset, out.statement_type, out.tables, out.destructive, sorted(out.flags),
            out.fingerprint, out.rows_affected, out.status, out.attribution, out.definer, out.note,
            out.counter,
        )  # fmt: skip
    return repr(out)


def watched(items: Iterable[Item | Settle], tracker: SessionTracker, gaps: GapFinder, states: list[Any]):
    """The items, noting both stages' states each time one is taken (where a cut may be made)."""
    for item in items:
        states.append((tracker.to_state(), gaps.to_state(), tracker.holding))
        yield item
    states.append((tracker.to_state(), gaps.to_state(), tracker.holding))


def _both(items: list[Item | Settle], dialect: str = "mysql") -> tuple[list[Any], list[Any]]:
    runs = []
    for fused in (False, True):
        tracker, gaps = SessionTracker("db1"), GapFinder(dialect)
        tracker.dialect = dialect
        states: list[Any] = []
        source = watched(copy.deepcopy(items), tracker, gaps, states)
        out: Iterator[object] = (
            mysql_stages(source, tracker, gaps)
            if fused
            else gaps.process(classify_events(tracker.process(source), tracker.routines))
        )
        shown = [comparable(o) for o in out]
        runs.append((shown, states, tracker.to_state(), gaps.to_state()))
    return runs[0], runs[1]


def _items(path: Path, pause_every: int = 0) -> list[Item | Settle]:
    data = path.read_bytes()
    fmt = detect_format(data[:1024])
    items: list[Item | Settle] = list(
        by_name(fmt).parse(data.splitlines(keepends=True), hints=Hints(mtime_year=2026))
    )
    if pause_every:  # where the bytes end for now, a followed file's read tells the tracker
        for i in range(len(items) - 1, 0, -pause_every):
            items.insert(i, SETTLE)
    return items


@pytest.mark.parametrize("path", _logs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_log_gives_the_same_items_and_states(path: Path) -> None:
    for pause_every in (0, 7):
        chained, fused = _both(_items(path, pause_every))
        assert fused[0] == chained[0]  # the same outputs, in the same order
        assert fused[1] == chained[1]  # the same states at each item taken
        assert fused[2:] == chained[2:]  # and at the end


def test_the_fixtures_hold_the_paths_the_loop_must_keep() -> None:
    """A guard on the test above: the fixtures reach banners, corrections, gaps and problems."""
    seen: set[str] = set()
    for path in _logs():
        for shown in _both(_items(path))[1][0]:
            seen.add(shown[0] if isinstance(shown, tuple) else shown.split("(", 1)[0])
    assert {"event", "FlagCorrection", "GapRecord", "Problem"} <= seen


RARE = b"""\
this line is no record
/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:
Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock
Time\t\t    Id Command\tArgument
261122  8:49:01\t    17 Connect\tapp@10.0.0.5 on shop using TCP/IP
\t\t    17 Query\tSET autocommit=0
\t\t    17 Query\tDELETE FROM orders WHERE id = 4
\t\t    17 Query\tROLLBACK
\t\t    17 Query\tBEGIN
\t\t    17 Query\tUPDATE orders SET total = 0
261122  8:40:00\t    17 Query\tROLLBACK
\t\t    17 Query\tBEGIN
\t\t    17 Query\tUPDATE orders SET total = 1
\t\t    17 Query\tSET PASSWORD FOR 'app'@'%' = PASSWORD('hunter2')
\t\t    18 Query\tDELETE FROM stock
\t\t    17 Change user\troot@localhost on shop
\t\t    17 Query\tSET GLOBAL general_log = OFF
261122  8:49:05\t    17 Query\tSET GLOBAL general_log = ON
\t\t    17 Query\tPREPARE s FROM 'DELETE FROM orders'
\t\t    17 Query\tEXECUTE s
\t\t    17 Query\tCREATE PROCEDURE wipe() DELETE FROM stock
\t\t    17 Query\tCALL wipe()
\t\t    17 Init DB\tother
\t\t    17 Query\tUSE shop
\t\t    17 Query\tFLUSH LOGS
/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:
Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock
Time\t\t    Id Command\tArgument
\t\t    17 Query\tSELECT 1
261122  8:49:03\t    17 Query\tSELECT 2
\t\t    19 Connect\tbob@h on  using Socket
\t\t    19 Query\tDELETE FROM t
\t\t    19 Quit\t
/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:
Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock
Time\t\t    Id Command\tArgument
261122  9:00:00\t     3 Connect\troot@localhost on  using Socket
\t\t     3 Query\tSELECT 3
\t\t    17 Query\tSELECT 4
"""


@pytest.mark.parametrize("pause_every", [0, 1, 2, 3, 5])
def test_banners_transactions_switches_and_secrets_the_same_way(pause_every: int, tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    log.write_bytes(RARE)
    items = _items(log, pause_every)
    chained, fused = _both(items)
    assert fused == chained
    kinds = {s[0] if isinstance(s, tuple) else s.split("(", 1)[0] for s in fused[0]}
    assert {"event", "FlagCorrection", "GapRecord", "Problem"} <= kinds
    flags = set().union(*(set(s[20]) for s in fused[0] if isinstance(s, tuple)))
    assert {"secret_masked", "anti_forensic", "prepared", "unattributed"} <= flags
    assert any(isinstance(s, str) and "rolled_back" in s for s in fused[0])
