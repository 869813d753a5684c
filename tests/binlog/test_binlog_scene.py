"""The binlog scene (issue 21): which rows each destructive statement changed, who made them,
and flashback SQL that puts them back.

tests/fixtures/binlog_scene/ holds what a private MariaDB 10.11 wrote (see regenerate.py
there): its ROW binary logs (a FLUSH BINARY LOGS and a restart: three files), its general
log, the truth (the rows the server itself returned before and after each statement) and a
dump of the final state. No Django here: the binlog package is pure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from ingest.binlog.flashback import flashback_sql, table_info
from ingest.binlog.images import RowImage, row_images, table_of
from ingest.binlog.join import Link, LoggedStatement, Unlinked, join, row_statements
from ingest.binlog.metadata import BinlogFile, Transaction, scan
from ingest.binlog.schema import parse_create_table
from ingest.parsers import general_log
from ingest.parsers.records import LogRecord, ServerStart

SCENE = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_scene"
TRUTH_FILE = SCENE / "truth.json"
TRUTH: dict[str, Any] = json.loads(TRUTH_FILE.read_text()) if TRUTH_FILE.exists() else {}
pytestmark = pytest.mark.skipif(
    not TRUTH, reason="tests/fixtures/binlog_scene has no truth.json: run regenerate.py"
)


def _canon(rows: list[dict[str, Any] | None]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows)


class Scene:
    """The scan of every binlog file, the general log's statements, and the join."""

    def __init__(self) -> None:
        self.transactions: list[Transaction] = []
        boot = 0
        boots: dict[tuple[str, int], int] = {}
        for name in TRUTH["files"]["binlog"]:
            with (SCENE / name).open("rb") as f:
                for item in scan(f, name):
                    if isinstance(item, BinlogFile):
                        boot += 1 if item.created else 0  # non-zero only in the first file of a boot
                    elif isinstance(item, Transaction):
                        self.transactions.append(item)
                        boots[(item.file, item.start)] = boot
                    else:
                        pytest.fail(f"{name}: {item}")
        self.rows = row_statements(self.transactions, lambda tx: boots[(tx.file, tx.start)])
        self.logged: list[LoggedStatement] = []
        seq: dict[tuple[int, int | None], int] = {}
        boot = 0
        for name in TRUTH["files"]["general_log"]:
            with (SCENE / name).open("rb") as f:
                for item in general_log.parse(f):
                    if isinstance(item, ServerStart):
                        boot += 1
                    elif isinstance(item, LogRecord) and item.command == "Query" and item.occurred_at:
                        key = (boot, item.connection_id)
                        seq[key] = seq.get(key, 0) + 1
                        when = int(item.occurred_at.replace(tzinfo=UTC).timestamp())
                        sql = item.argument.decode()
                        self.logged.append(
                            LoggedStatement(
                                (boot, item.connection_id, seq[key], sql),
                                when,
                                item.connection_id,
                                sql,
                                seq[key],
                                boot,
                            )
                        )
        self.results = {r.row_statement: r for r in join(self.logged, self.rows)}
        self.statement_of = {
            (t.file, t.start, i): (t, s) for t in self.transactions for i, s in enumerate(t.statements)
        }

    def logged_key(self, entry: dict[str, Any]) -> Any:
        """The logged statement of a truth entry: its boot, connection and text, in order."""
        same = [
            s
            for s in self.logged
            if (s.boot, s.connection_id, s.sql) == (entry["boot"], entry["connection_id"], entry["sql"])
        ]
        earlier = [
            e
            for e in TRUTH["statements"]
            if e["seq"] < entry["seq"]
            and (e["boot"], e["connection_id"], e["sql"])
            == (entry["boot"], entry["connection_id"], entry["sql"])
        ]
        return same[len(earlier)].key

    def images(self, key: Any) -> list[RowImage]:
        tx, statement = self.statement_of[key]
        out: list[RowImage] = []
        with (SCENE / tx.file).open("rb") as f:
            for change in statement.changes:
                out.extend(row_images(f, change))
        return out


@pytest.fixture(scope="module")
def scene() -> Scene:
    return Scene()


DESTRUCTIVE = [e for e in TRUTH.get("statements", []) if e["change"]]


@pytest.mark.parametrize("entry", DESTRUCTIVE, ids=[f"{e['seq']}-{e['user']}" for e in DESTRUCTIVE])
def test_it_links_each_destructive_statement_with_the_expected_confidence(
    scene: Scene, entry: dict[str, Any]
) -> None:
    key = scene.logged_key(entry)
    links = [
        r
        for r in scene.results.values()
        if isinstance(r, Link) and (r.statement == key or key in r.candidates)
    ]
    if entry["expect"] == "unlinked":
        assert links == []
        body = [
            r for r in scene.results.values() if isinstance(r, Unlinked) and r.reason.startswith("routine")
        ]
        assert len(body) == 1
        assert _canon([i.as_json()["before"] for i in scene.images(body[0].row_statement)]) == _canon(
            entry["before"]
        )
        return
    if entry["expect"] == "ambiguous":
        assert links and all(r.confidence == "ambiguous" for r in links)
        return
    assert len(links) == 1, links
    assert links[0].confidence == entry["expect"]
    assert links[0].evidence


@pytest.mark.parametrize("entry", DESTRUCTIVE, ids=[f"{e['seq']}-{e['user']}" for e in DESTRUCTIVE])
def test_it_decodes_exactly_the_rows_each_statement_changed(scene: Scene, entry: dict[str, Any]) -> None:
    key = scene.logged_key(entry)
    if entry["expect"] in ("unlinked", "ambiguous"):
        return  # their rows are checked where they are attributed (above, and the union below)
    (link,) = [r for r in scene.results.values() if isinstance(r, Link) and r.statement == key]
    images = scene.images(link.row_statement)
    assert {i.change for i in images} == {entry["change"]}
    assert all(i.complete for i in images)
    assert _canon([i.as_json()["before"] for i in images if i.before is not None]) == _canon(entry["before"])
    assert _canon([i.as_json()["after"] for i in images if i.after is not None]) == _canon(entry["after"])
    assert entry["rows_affected"] == len(images)


def test_the_ambiguous_statements_rows_are_theirs_together(scene: Scene) -> None:
    entries = [e for e in DESTRUCTIVE if e["expect"] == "ambiguous"]
    keys = {scene.logged_key(e) for e in entries}
    links = [r for r in scene.results.values() if isinstance(r, Link) and set(r.candidates) == keys]
    assert len(links) == len(entries) == 2
    rows = [i.as_json()["before"] for link in links for i in scene.images(link.row_statement)]
    assert _canon(rows) == _canon([r for e in entries for r in e["before"]])


def test_every_row_transaction_is_accounted_for(scene: Scene) -> None:
    assert len(scene.results) == len(scene.rows)
    linked = [r for r in scene.results.values() if isinstance(r, Link) and r.statement is not None]
    assert len({r.statement for r in linked}) == len(linked), "a logged statement linked twice"
    rolled_back = [e for e in TRUTH["statements"] if "rolled back" in e["note"]]
    assert rolled_back and not any(r.statement == scene.logged_key(rolled_back[0]) for r in linked)


# -- flashback: applied to a copy of the final state ------------------------------------------

MARIADBD = Path("/usr/sbin/mariadbd")


def _flashback_script(scene: Scene) -> str:
    schemas = {t: parse_create_table(sql) for t, sql in TRUTH["create_table"].items()}
    infos = {}
    statements = []
    for tx in scene.transactions:
        with (SCENE / tx.file).open("rb") as f:
            for s in tx.statements:
                rows: list[RowImage] = []
                for change in s.changes:
                    table = table_of(f, change)
                    infos[table.name] = table_info(table, schemas.get(table.name))
                    rows.extend(row_images(f, change))
                if rows:
                    statements.append((s.text or "", rows))
    return flashback_sql(reversed(statements), infos)


def test_flashback_leaves_out_generated_columns_and_matches_keyless_rows_on_every_column(
    scene: Scene,
) -> None:
    sql = _flashback_script(scene)
    assert "`total`" not in sql
    assert "DELETE FROM `crime`.`orders` WHERE `id` <=> 12;" in sql
    # The keyless ledger only lost rows: INSERTs, nothing to match with LIMIT 1.
    assert not any(line.endswith("LIMIT 1;") for line in sql.splitlines())
    assert sql.splitlines()[-1] == "COMMIT;"


@pytest.fixture(scope="module")
def private_server() -> Iterator[Any]:
    if not MARIADBD.exists():
        pytest.skip("no /usr/sbin/mariadbd: the flashback test starts a private MariaDB")
    if os.geteuid() != 0:
        pytest.skip("the private MariaDB runs as root (--user=root)")
    # Imported here: the fixture script pulls in pymysql and the attribution scene's server.
    from tests.fixtures.attribution_scene.regenerate import PrivateServer

    base = Path(tempfile.mkdtemp(prefix="auditweb-binlog-flashback-"))
    server = PrivateServer(base)
    try:
        server.install()
        server.write_options(general_log=False, logging=False)
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _client(server: Any, sql: bytes) -> None:
    subprocess.run(
        ["mariadb", f"--socket={server.socket}", "-uroot"], input=sql, check=True, capture_output=True
    )


def test_flashback_newest_first_brings_back_the_initial_state(scene: Scene, private_server: Any) -> None:
    _client(private_server, (SCENE / "final.sql").read_bytes())
    rows = _dump(private_server)
    assert rows == {t: _canon(r) for t, r in TRUTH["final"].items()}, (
        "the dump did not restore the final state"
    )
    _client(private_server, _flashback_script(scene).encode())
    assert _dump(private_server) == {t: _canon(r) for t, r in TRUTH["initial"].items()}


def _dump(server: Any) -> dict[str, list[str]]:
    # Imported here: only the MariaDB test needs a client, and it reads like the scene's truth.
    import pymysql

    from tests.fixtures.binlog_scene.regenerate import json_safe

    conn = pymysql.connect(unix_socket=str(server.socket), user="root", charset="utf8mb4")
    out = {}
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as c:
            c.execute("SET time_zone = '+00:00'")
            for table in ("orders", "files", "ledger"):
                c.execute(f"SELECT * FROM crime.{table}")
                out[table] = _canon([{k: json_safe(v) for k, v in r.items()} for r in c.fetchall()])
    finally:
        conn.close()
    return out
