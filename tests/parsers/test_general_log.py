"""The general query log parser, fed real samples and hostile bytes.

Each sample test compares the complete list of items the parser yields with a
literal list written from reading the sample: those lists are the specification.
Every test also checks that the items account for every byte of the input, in order.
No Django, no database.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ingest.parsers import general_log
from ingest.parsers.general_log import GeneralLogParser
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Hints, Item, LogRecord, Problem, ServerStart

from ..conftest import CORPUS_MISSING, SHARED

CORPUS = SHARED / "corpus" / "general-log-file"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "genlog"
SCENARIO = FIXTURES / "mariadb-10.11.19-scenario.log"
SLAP = FIXTURES / "mariadb-10.11.19-slap.log"


# -- helpers -------------------------------------------------------------------------


def parse(data: bytes, **kwargs: Any) -> list[Item]:
    """Parse bytes the way the pipeline does: lines of a binary stream."""
    items = list(general_log.parse(io.BytesIO(data), **kwargs))
    assert_accounts_for(data, items, kwargs.get("start_offset", 0), kwargs.get("start_line", 1))
    return items


def is_time_note(item: Item) -> bool:
    """A Problem about a record's time: it points at the record, it holds no bytes of its own."""
    return isinstance(item, Problem) and item.reason.startswith("invalid time")


def assert_accounts_for(data: bytes, items: list[Item], offset: int = 0, line: int = 1) -> None:
    """Items tile the input: each starts where the one before ended, and (short garbage
    excerpts aside) their raw bytes concatenate back to the input."""
    for item in items:
        if is_time_note(item):
            continue
        assert (item.offset, item.line) == (offset, line), item
        if isinstance(item, Problem):  # garbage: the excerpt, and the size in the reason
            size = int(re.search(r"(\d+) bytes", item.reason).group(1))
            lines = int(re.search(r"(\d+) lines?", item.reason).group(1))
            assert data[offset : offset + size].startswith(item.raw)
            assert data[offset : offset + size].count(b"\n") in (lines, lines - 1)
            offset, line = offset + size, line + lines
        else:
            assert data[offset : offset + len(item.raw)] == item.raw
            offset, line = offset + len(item.raw), line + item.raw.count(b"\n")
    assert offset == len(data)


def view(item: Item) -> dict[str, Any]:
    """Every field of an item but its raw bytes (checked by assert_accounts_for)."""
    d = asdict(item)
    if not isinstance(item, Problem):
        del d["raw"]
    return {"type": type(item).__name__, **d}


def rec(
    line: int, offset: int, when: datetime | None, cid: int, command: str, argument: bytes, **who: Any
) -> dict:
    return view(LogRecord(line, offset, b"", when, cid, command, argument, **who))


def start(line: int, offset: int, version: str) -> dict:
    return view(ServerStart(line, offset, b"", version))


def views(items: list[Item]) -> list[dict]:
    return [view(i) for i in items]


def corpus(name: str) -> bytes:
    if not CORPUS.is_dir():
        pytest.skip(CORPUS_MISSING)
    return (CORPUS / name).read_bytes()


PLUS8 = timezone(timedelta(hours=8))

# -- the shared corpus: every general-log sample, every item ---------------------------

CORPUS_EXPECTED: dict[str, list[dict]] = {
    # MySQL 5.0: the time only when it changes, "%-11s" padded commands, a multi-line
    # SELECT whose first line ends with a space, "on  " with no database.
    "percona-toolkit_genlog001_5.0-style_multiline.txt": [
        rec(
            1,
            0,
            datetime(2005, 10, 7, 21, 55, 24),
            42,
            "Connect",
            b"root@localhost on db1",
            user="root",
            host="localhost",
            database="db1",
        ),
        rec(
            2,
            58,
            datetime(2005, 10, 7, 21, 55, 24),
            42,
            "Query",
            b"SELECT foo \n                         FROM tbl\n                         WHERE col=12345\n"
            b"                         ORDER BY col",
        ),
        rec(6, 217, datetime(2005, 10, 7, 21, 55, 24), 42, "Quit", b""),
        rec(
            7,
            244,
            datetime(2006, 12, 26, 15, 42, 36),
            11,
            "Connect",
            b"root@localhost on  ",
            user="root",
            host="localhost",
        ),
        rec(8, 300, datetime(2006, 12, 26, 15, 42, 36), 11, "Init DB", b"my_webstats"),
        rec(
            9,
            346,
            datetime(2006, 12, 26, 15, 42, 36),
            11,
            "Query",
            b"SELECT DISTINCT col FROM tbl WHERE foo=20061219",
        ),
        rec(10, 428, datetime(2006, 12, 26, 16, 44, 48), 11, "Quit", b""),
    ],
    # MySQL 5.1: "100211  0:55:24" (space-padded hour), spaces after the command, two long
    # multi-line statements, no final Quit.
    "percona-toolkit_genlog002_5.1-style_multiline.txt": [
        rec(
            1,
            0,
            datetime(2010, 2, 11, 0, 55, 24),
            51,
            "Query",
            b"SELECT category_id\n                FROM auction_category_map \n"
            b"                WHERE auction_id = '3015563'",
        ),
        rec(
            4,
            143,
            datetime(2010, 2, 11, 0, 55, 24),
            51,
            "Query",
            b"SELECT auction_id, auction_title_en AS title, close_time,\n"
            b"                                         number_of_items_per_lot, \n"
            b"                                         replace (replace"
            b" (thumbnail_url,  'sm_thumb', 'carousel'),"
            b" 'small_thumb', 'carousel') as thumbnail_url,\n"
            b"                                         replace (replace"
            b" (thumbnail_url,  'sm_thumb', 'tiny_thumb'),"
            b" 'small_thumb', 'tiny_thumb') as tinythumb_url,\n"
            b"                                         current_bid\n"
            b"                FROM   auction_search\n"
            b"                WHERE  platform_flag_1 = 1\n"
            b"                AND    close_flag = 0 \n"
            b"                AND    close_time >= NOW()\n"
            b"                AND    marketplace = 'AR'\n"
            b"                AND auction_id IN"
            b" (3015562,3028764,3015564,3019075,3015574,2995142,3040162,3015573,"
            b"2995135,3015578)\n"
            b"                ORDER BY close_time ASC\n"
            b"                LIMIT 500",
        ),
    ],
    # Hand-edited 5.0 log: "051007   21:55:24", and spaces + tab where the second time
    # was, so every record carries the first time.
    "percona-toolkit_genlog003_odd-spacing.txt": [
        rec(
            1,
            0,
            datetime(2005, 10, 7, 21, 55, 24),
            42,
            "Connect",
            b"root@localhost on db1",
            user="root",
            host="localhost",
            database="db1",
        ),
        rec(
            2,
            60,
            datetime(2005, 10, 7, 21, 55, 24),
            42,
            "Query",
            b"SELECT foo \n                         FROM tbl\n                         WHERE col=12345\n"
            b"                         ORDER BY col",
        ),
        rec(6, 219, datetime(2005, 10, 7, 21, 55, 24), 42, "Quit", b""),
        rec(
            7,
            246,
            datetime(2005, 10, 7, 21, 55, 24),
            11,
            "Connect",
            b"root@localhost on  ",
            user="root",
            host="localhost",
        ),
        rec(8, 302, datetime(2005, 10, 7, 21, 55, 24), 11, "Init DB", b"my_webstats"),
        rec(
            9,
            348,
            datetime(2005, 10, 7, 21, 55, 24),
            11,
            "Query",
            b"SELECT DISTINCT col FROM tbl WHERE foo=20061219",
        ),
        rec(10, 430, datetime(2005, 10, 7, 21, 55, 24), 11, "Quit", b""),
    ],
    # No time at all; a refused login, a proxy-style "as  on ", an address as host.
    "percona-toolkit_genlog004_access-denied.txt": [
        rec(
            1,
            0,
            None,
            12345,
            "Connect",
            b"Access denied for user 'nobody'@'localhost' (using password: NO)",
            user="nobody",
            host="localhost",
            status="denied",
            extra={"using_password": "NO"},
        ),
        rec(
            2,
            81,
            None,
            12345,
            "Connect",
            b"nobody@localhost as  on ",
            user="nobody",
            host="localhost",
            extra={"authenticated_as": ""},
        ),
        rec(3, 122, None, 31519, "Query", b"BEGIN"),
        rec(
            4,
            142,
            None,
            98765,
            "Connect",
            b"payments_r@1.2.3.4 on sar",
            user="payments_r",
            host="1.2.3.4",
            ip="1.2.3.4",
            database="sar",
        ),
    ],
    # MySQL 5.7: start banner, ISO times in UTC with microseconds.
    "percona-toolkit_genlog005_5.7.12-ubuntu_banner.txt": [
        start(1, 0, "5.7.12-0ubuntu1-log ((Ubuntu))"),
        rec(
            4,
            174,
            datetime(2016, 6, 7, 19, 7, 2, 558338, tzinfo=UTC),
            3,
            "Connect",
            b"phpmyadmin@localhost on  using Socket",
            user="phpmyadmin",
            host="localhost",
            extra={"connection_type": "Socket"},
        ),
        rec(
            5,
            253,
            datetime(2016, 6, 7, 19, 7, 2, 558581, tzinfo=UTC),
            4,
            "Connect",
            b"root@localhost on  using Socket",
            user="root",
            host="localhost",
            extra={"connection_type": "Socket"},
        ),
        rec(
            6,
            326,
            datetime(2016, 6, 7, 19, 7, 2, 558713, tzinfo=UTC),
            4,
            "Query",
            b"SET CHARACTER SET 'utf8mb4'",
        ),
        rec(
            7,
            393,
            datetime(2016, 6, 7, 19, 7, 2, 558791, tzinfo=UTC),
            4,
            "Query",
            b"SET collation_connection = 'utf8mb4_unicode_ci'",
        ),
        rec(
            8,
            480,
            datetime(2016, 6, 7, 19, 7, 2, 563721, tzinfo=UTC),
            6,
            "Query",
            b"SELECT 1 FROM mysql.user LIMIT 1",
        ),
        rec(9, 552, datetime(2016, 6, 7, 19, 7, 2, 565845, tzinfo=UTC), 6, "Query", b"SELECT CURRENT_USER()"),
        rec(
            10,
            613,
            datetime(2016, 6, 7, 19, 7, 2, 565999, tzinfo=UTC),
            6,
            "Query",
            b"SELECT 1 FROM (SELECT `GRANTEE`, `IS_GRANTABLE` FROM"
            b" `INFORMATION_SCHEMA`.`COLUMN_PRIVILEGES` UNION"
            b" SELECT `GRANTEE`, `IS_GRANTABLE` FROM"
            b" `INFORMATION_SCHEMA`.`TABLE_PRIVILEGES` UNION SELECT `GRANTEE`,"
            b" `IS_GRANTABLE` FROM"
            b" `INFORMATION_SCHEMA`.`SCHEMA_PRIVILEGES` UNION SELECT `GRANTEE`, `IS_GRANTABLE`"
            b" FROM `INFORMATION_SCHEMA`.`USER_PRIVILEGES`) t WHERE `IS_GRANTABLE` = 'YES' AND"
            b" '''root''@''localhost''' LIKE `GRANTEE` LIMIT 1",
        ),
        rec(11, 1082, datetime(2016, 6, 7, 19, 7, 2, 567097, tzinfo=UTC), 6, "Query", b"SELECT USER()"),
        rec(
            12,
            1135,
            datetime(2016, 6, 7, 19, 7, 2, 569194, tzinfo=UTC),
            6,
            "Query",
            b"SELECT `SCHEMA_NAME` FROM `INFORMATION_SCHEMA`.`SCHEMATA`,"
            b" (SELECT DB_first_level FROM ( SELECT DISTINCT"
            b" SUBSTRING_INDEX(SCHEMA_NAME, '_', 1) DB_first_level FROM"
            b" INFORMATION_SCHEMA.SCHEMATA WHERE TRUE ) t"
            b" ORDER BY DB_first_level ASC LIMIT 0, 100) t2 WHERE TRUE"
            b" AND 1 = LOCATE(CONCAT(DB_first_level, '_'),"
            b" CONCAT(SCHEMA_NAME, '_')) ORDER BY SCHEMA_NAME ASC",
        ),
        rec(
            13,
            1530,
            datetime(2016, 6, 7, 19, 7, 2, 569779, tzinfo=UTC),
            5,
            "Query",
            b"SELECT `db_name`, COUNT(*) AS `count` FROM"
            b" `phpmyadmin`.`pma__navigationhiding` WHERE `username`='root'"
            b" GROUP BY `db_name`",
        ),
        rec(
            14,
            1692,
            datetime(2016, 6, 7, 19, 7, 2, 572396, tzinfo=UTC),
            6,
            "Query",
            b"SELECT COUNT(*) FROM ( SELECT DISTINCT SUBSTRING_INDEX(SCHEMA_NAME, '_', 1) DB_first_level FROM"
            b" INFORMATION_SCHEMA.SCHEMATA WHERE TRUE ) t",
        ),
        rec(
            15,
            1870,
            datetime(2016, 6, 7, 19, 7, 2, 575723, tzinfo=UTC),
            5,
            "Query",
            b"SELECT `label`, `id`, `query`, `dbase` AS `db`, IF (`user` = '', true, false) AS `shared` FROM"
            b" `phpmyadmin`.`pma__bookmark` WHERE `user` = '' OR `user` = 'root'",
        ),
        rec(
            16,
            2070,
            datetime(2016, 6, 7, 19, 7, 2, 576333, tzinfo=UTC),
            5,
            "Query",
            b"SELECT `tab` FROM `phpmyadmin`.`pma__usergroups` WHERE"
            b" `allowed` = 'N' AND `tab` LIKE 'server%' AND"
            b" `usergroup` = (SELECT usergroup FROM `phpmyadmin`.`pma__users` WHERE `username` = 'root')",
        ),
    ],
    # MySQL 5.7 with log_timestamps=SYSTEM: "+08:00" offsets, a "Quit\t" with a tab.
    "percona-toolkit_pt-1573_5.7.21_tz-offset.log": [
        start(1, 0, "5.7.21-log (MySQL Community Server (GPL))"),
        rec(
            4,
            195,
            datetime(2018, 9, 7, 18, 45, 40, 98124, tzinfo=PLUS8),
            257426,
            "Connect",
            b"mysqlha_common@127.0.0.1 on  using TCP/IP",
            user="mysqlha_common",
            host="127.0.0.1",
            ip="127.0.0.1",
            extra={"connection_type": "TCP/IP"},
        ),
        rec(
            5,
            285,
            datetime(2018, 9, 7, 18, 45, 40, 98511, tzinfo=PLUS8),
            257426,
            "Query",
            b"set autocommit=0",
        ),
        rec(
            6,
            348,
            datetime(2018, 9, 7, 18, 45, 40, 98613, tzinfo=PLUS8),
            257426,
            "Query",
            b"set autocommit=1",
        ),
        rec(
            7,
            411,
            datetime(2018, 9, 7, 18, 45, 40, 98769, tzinfo=PLUS8),
            257426,
            "Query",
            b"show global status like 'Threads_connected'",
        ),
        rec(8, 501, datetime(2018, 9, 7, 18, 45, 40, 101009, tzinfo=PLUS8), 257426, "Quit", b""),
    ],
    "percona-toolkit_pt-upgrade_genlog001.txt": [
        rec(
            1,
            0,
            datetime(2005, 10, 7, 21, 55, 24),
            42,
            "Connect",
            b"root@localhost on db1",
            user="root",
            host="localhost",
            database="db1",
        ),
        rec(2, 58, datetime(2005, 10, 7, 21, 55, 24), 42, "Query", b"SELECT * FROM test.t WHERE id > 5"),
        rec(3, 126, datetime(2005, 10, 7, 21, 55, 24), 42, "Quit", b""),
        rec(
            4,
            153,
            datetime(2006, 12, 26, 15, 42, 36),
            11,
            "Connect",
            b"root@localhost on  ",
            user="root",
            host="localhost",
        ),
        rec(5, 209, datetime(2006, 12, 26, 15, 42, 36), 11, "Init DB", b"test"),
        rec(6, 248, datetime(2006, 12, 26, 15, 42, 36), 11, "Query", b"INSERT INTO t VALUES (null, 'zzz')"),
        rec(7, 317, datetime(2006, 12, 26, 16, 44, 48), 11, "Quit", b""),
    ],
}


def test_every_corpus_sample_has_an_expected_list() -> None:
    if not CORPUS.is_dir():
        pytest.skip(CORPUS_MISSING)
    samples = {p.name for p in CORPUS.iterdir() if "expected-report" not in p.name}
    assert samples == set(CORPUS_EXPECTED)


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(CORPUS_EXPECTED))
def test_it_parses_every_item_of_the_corpus_sample(name: str) -> None:
    assert views(parse(corpus(name))) == CORPUS_EXPECTED[name]


# -- agreement with pt-query-digest's expected reports ----------------------------------
#
# pt-query-digest --type genlog reports, per sample: the number of events ("Overall: N
# total"), the time range, and per query class its Count, its "Query size" total (the
# bytes of the statement, or of "administrator command: X" for other commands), and the
# Databases, Hosts and Users seen. We compare all of those with our records:
# - events: every LogRecord;
# - time range: the first and last occurred_at (pt inherits the last time seen, as we
#   carry it forward);
# - per class: the records with that command (or that exact statement), their count and
#   summed argument sizes; this checks argument bytes exactly (trailing spaces, newlines);
# - Databases: the union over classes equals the databases the log names (Connect
#   "on db" and Init DB); pt cuts long names with "...", compared as prefixes;
# - Users and Hosts: the union equals those of our Connect records.
# Not compared: pt's "at byte" offsets (they point after its look-ahead line for
# one-line queries) and QPS/concurrency figures.


def _digest(report: str) -> dict[str, Any]:
    overall = int(re.search(r"# Overall: (\d+) total", report).group(1))
    time_range = re.search(r"# Time range: (.*)", report).group(1)
    classes = []
    for block in re.split(r"\n# Query \d+:", report)[1:]:
        block = block.split("\n# Profile")[0]
        sample = block.rsplit("\n#", 1)[1].split("\n", 1)[1].rstrip("\n").removesuffix("\\G")
        names = {}
        for attr in ("Databases", "Hosts", "Users"):
            m = re.search(rf"# {attr} +(.*)", block)
            names[attr] = {re.sub(r" \(\d+/\d+%\)$", "", n) for n in m.group(1).split(", ")} if m else set()
        classes.append(
            {
                "count": int(re.search(r"# Count +\d+ +(\d+)", block).group(1)),
                "size": int(re.search(r"# Query size +\d+ +(\d+)", block).group(1)),
                "sample": sample,
                **names,
            }
        )
    return {"overall": overall, "time_range": time_range, "classes": classes}


def _pt_time(when: datetime) -> str:
    if when.tzinfo is None:
        return when.strftime("%Y-%m-%d %H:%M:%S")
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.mark.shared
@pytest.mark.parametrize(
    ("sample", "report"),
    [
        (
            "percona-toolkit_genlog001_5.0-style_multiline.txt",
            "percona-toolkit_genlog001.pt-query-digest-expected-report.txt",
        ),
        (
            "percona-toolkit_genlog002_5.1-style_multiline.txt",
            "percona-toolkit_genlog002.pt-query-digest-expected-report.txt",
        ),
        (
            "percona-toolkit_genlog003_odd-spacing.txt",
            "percona-toolkit_genlog003.pt-query-digest-expected-report.txt",
        ),
        (
            "percona-toolkit_genlog005_5.7.12-ubuntu_banner.txt",
            "percona-toolkit_genlog005.pt-query-digest-expected-report.txt",
        ),
    ],
)
def test_it_agrees_with_pt_query_digest(sample: str, report: str) -> None:
    records = [i for i in parse(corpus(sample)) if isinstance(i, LogRecord)]
    digest = _digest(corpus(report).decode())

    assert len(records) == digest["overall"]
    first, last = _pt_time(records[0].occurred_at), _pt_time(records[-1].occurred_at)
    expected_range = f"all events occurred at {first}" if first == last else f"{first} to {last}"
    assert digest["time_range"] == expected_range

    for cls in digest["classes"]:
        if cls["sample"].startswith("administrator command: "):
            command = cls["sample"].removeprefix("administrator command: ")
            matching = [r for r in records if r.command == command]
            size = len(cls["sample"]) * len(matching)
        else:
            matching = [r for r in records if r.command == "Query" and r.argument.decode() == cls["sample"]]
            size = sum(len(r.argument) for r in matching)
        assert (len(matching), size) == (cls["count"], cls["size"]), cls["sample"]

    named = {r.database for r in records if r.command == "Connect" and r.database}
    named |= {r.argument.decode() for r in records if r.command == "Init DB"}
    reported = set().union(*(c["Databases"] for c in digest["classes"]))
    assert {n for n in named if not any(n.startswith(r.removesuffix("...")) for r in reported)} == set()
    assert {r for r in reported if not any(n.startswith(r.removesuffix("...")) for n in named)} == set()
    connects = [r for r in records if r.command == "Connect"]
    assert set().union(*(c["Users"] for c in digest["classes"])) == {r.user for r in connects}
    assert set().union(*(c["Hosts"] for c in digest["classes"])) == {r.host for r in connects}


# -- real MariaDB fixtures (tests/fixtures/genlog/regenerate.py) ---------------------------


def T(h: int, m: int, s: int) -> datetime:  # the fixture's day, server local time
    return datetime(2026, 11, 22, h, m, s)


def tcp(user: str, database: str | None = None) -> dict[str, Any]:
    return {
        "user": user,
        "host": "127.0.0.1",
        "ip": "127.0.0.1",
        "database": database,
        "extra": {"connection_type": "TCP/IP"},
    }


def socket(user: str) -> dict[str, Any]:
    return {"user": user, "host": "localhost", "extra": {"connection_type": "Socket"}}


MARIADB = "10.11.19-MariaDB-0+deb12u1 (Debian 12)"

SCENARIO_EXPECTED = [
    # The log is switched on: banner; the session that did it quits.
    start(1, 0, MARIADB),
    rec(4, 166, T(8, 48, 18), 97, "Quit", b""),
    # 1. root sets up shop and the accounts.
    rec(5, 195, T(8, 48, 18), 98, "Connect", b"root@localhost on  using Socket", **socket("root")),
    rec(6, 244, T(8, 48, 18), 98, "Query", b"CREATE DATABASE shop"),
    rec(7, 280, T(8, 48, 18), 98, "Query", b"SELECT DATABASE()"),
    rec(8, 313, T(8, 48, 18), 98, "Init DB", b"shop"),
    rec(
        9,
        335,
        T(8, 48, 18),
        98,
        "Query",
        b"CREATE TABLE customers (\n  id INT PRIMARY KEY AUTO_INCREMENT,\n  name VARCHAR(100) NOT NULL,\n"
        b"  email VARCHAR(200)\n)",
    ),
    rec(
        14,
        465,
        T(8, 48, 18),
        98,
        "Query",
        b"CREATE TABLE orders (\n  id INT PRIMARY KEY AUTO_INCREMENT,\n  customer_id INT NOT NULL,\n"
        b"  total DECIMAL(10,2) NOT NULL,\n  status VARCHAR(20) NOT NULL DEFAULT 'new'\n)",
    ),
    rec(20, 645, T(8, 48, 18), 98, "Query", b"CREATE TABLE orders_archive LIKE orders"),
    rec(21, 700, T(8, 48, 18), 98, "Query", b"CREATE TABLE scratch (id INT)"),
    rec(
        22,
        745,
        T(8, 48, 18),
        98,
        "Query",
        b"INSERT INTO customers (name, email) VALUES ('Ann',"
        b" 'ann@example.com'), ('Ben', 'ben@example.com'),\n"
        b"  ('Chlo\xc3\xa9', 'chloe@example.com')",
    ),
    rec(
        24,
        893,
        T(8, 48, 18),
        98,
        "Query",
        b"INSERT INTO orders (customer_id, total) VALUES (1, 10.00),"
        b" (1, 25.50), (2, 99.90), (3, 5.00), (3, 12.00)",
    ),
    rec(25, 1013, T(8, 48, 18), 98, "Query", b"CREATE USER 'alice'@'%' IDENTIFIED BY 'Alice-pw-1'"),
    rec(26, 1079, T(8, 48, 18), 98, "Query", b"CREATE USER 'bob'@'%' IDENTIFIED BY 'Bob-pw-2'"),
    rec(27, 1141, T(8, 48, 18), 98, "Query", b"CREATE USER 'carol'@'localhost' IDENTIFIED BY 'Carol-pw-3'"),
    rec(
        28,
        1215,
        T(8, 48, 18),
        98,
        "Query",
        b"GRANT SELECT, INSERT, UPDATE, DELETE, DROP ON shop.* TO 'alice'@'%', 'bob'@'%'",
    ),
    rec(29, 1309, T(8, 48, 18), 98, "Query", b"GRANT SELECT ON shop.* TO 'carol'@'localhost'"),
    rec(30, 1370, T(8, 48, 18), 98, "Quit", b""),
    # 2. alice reads and inserts.
    rec(
        31, 1385, T(8, 48, 18), 99, "Connect", b"alice@127.0.0.1 on shop using TCP/IP", **tcp("alice", "shop")
    ),
    rec(32, 1439, T(8, 48, 18), 99, "Query", b"SELECT COUNT(*) FROM orders"),
    rec(
        33,
        1482,
        T(8, 48, 18),
        99,
        "Query",
        b"SELECT o.id, c.name, o.total\n  FROM orders o\n  JOIN customers c ON c.id = o.customer_id\n"
        b" WHERE o.total > 10\n ORDER BY o.id",
    ),
    rec(38, 1620, T(8, 48, 18), 99, "Query", b"INSERT INTO orders (customer_id, total) VALUES (2, 42.00)"),
    rec(39, 1693, T(8, 48, 18), 99, "Quit", b""),
    # 3. Two refused logins: MariaDB logs the attempt (which proves nothing, so no
    #    status), then the refusal, under one id.
    rec(40, 1708, T(8, 48, 18), 100, "Connect", b"mallory@127.0.0.1 on  using TCP/IP", **tcp("mallory")),
    rec(
        41,
        1760,
        T(8, 48, 18),
        100,
        "Connect",
        b"Access denied for user 'mallory'@'127.0.0.1' (using password: YES)",
        user="mallory",
        host="127.0.0.1",
        ip="127.0.0.1",
        status="denied",
        extra={"using_password": "YES"},
    ),
    rec(42, 1844, T(8, 48, 18), 101, "Connect", b"alice@127.0.0.1 on  using TCP/IP", **tcp("alice")),
    rec(
        43,
        1894,
        T(8, 48, 18),
        101,
        "Connect",
        b"Access denied for user 'alice'@'127.0.0.1' (using password: YES)",
        user="alice",
        host="127.0.0.1",
        ip="127.0.0.1",
        status="denied",
        extra={"using_password": "YES"},
    ),
    # 4. carol, over the socket: USE, then SQL-level PREPARE/EXECUTE (each also logged as
    #    Prepare/Execute with the statement).
    rec(44, 1976, T(8, 48, 19), 102, "Connect", b"carol@localhost on  using Socket", **socket("carol")),
    rec(45, 2040, T(8, 48, 19), 102, "Query", b"SELECT DATABASE()"),
    rec(46, 2073, T(8, 48, 19), 102, "Init DB", b"shop"),
    rec(
        47,
        2095,
        T(8, 48, 19),
        102,
        "Query",
        b"PREPARE big FROM 'SELECT id, total FROM orders WHERE total > ?'",
    ),
    rec(48, 2174, T(8, 48, 19), 102, "Prepare", b"SELECT id, total FROM orders WHERE total > ?"),
    rec(49, 2236, T(8, 48, 19), 102, "Query", b"SET @min = 20"),
    rec(50, 2265, T(8, 48, 19), 102, "Query", b"EXECUTE big USING @min"),
    rec(51, 2303, T(8, 48, 19), 102, "Execute", b"SELECT id, total FROM orders WHERE total > 20"),
    rec(52, 2366, T(8, 48, 19), 102, "Query", b"DEALLOCATE PREPARE big"),
    rec(53, 2404, T(8, 48, 19), 102, "Quit", b""),
    # 5. alice through the binary protocol, then Change user to bob.
    rec(
        54,
        2419,
        T(8, 48, 19),
        103,
        "Connect",
        b"alice@127.0.0.1 on shop using TCP/IP",
        **tcp("alice", "shop"),
    ),
    rec(55, 2473, T(8, 48, 19), 103, "Query", b"SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci'"),
    rec(56, 2537, T(8, 48, 20), 103, "Query", b"SET @@session.autocommit = ON"),
    rec(57, 2596, T(8, 48, 20), 103, "Prepare", b"SELECT id, total\n  FROM orders\n WHERE customer_id = ?"),
    rec(60, 2667, T(8, 48, 20), 103, "Reset stmt", b""),
    rec(61, 2688, T(8, 48, 20), 103, "Execute", b"SELECT id, total\n  FROM orders\n WHERE customer_id = 1"),
    rec(64, 2759, T(8, 48, 20), 103, "Close stmt", b""),
    rec(65, 2780, T(8, 48, 20), 103, "Prepare", b"UPDATE orders SET status = ? WHERE id = ?"),
    rec(66, 2839, T(8, 48, 20), 103, "Reset stmt", b""),
    rec(67, 2860, T(8, 48, 20), 103, "Execute", b"UPDATE orders SET status = 'shipped' WHERE id = 2"),
    rec(68, 2927, T(8, 48, 20), 103, "Close stmt", b""),
    rec(69, 2948, T(8, 48, 20), 103, "Statistics", b""),
    rec(70, 2969, T(8, 48, 20), 103, "Init DB", b"information_schema"),
    rec(71, 3005, T(8, 48, 20), 103, "Query", b"SELECT COUNT(*) FROM tables"),
    rec(
        72,
        3048,
        T(8, 48, 20),
        103,
        "Change user",
        b"bob@127.0.0.1 on shop using TCP/IP",
        **tcp("bob", "shop"),
    ),
    rec(73, 3104, T(8, 48, 20), 103, "Query", b"SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci'"),
    rec(74, 3168, T(8, 48, 20), 103, "Query", b"SET @@session.autocommit = ON"),
    rec(75, 3213, T(8, 48, 20), 103, "Quit", b""),
    # 6. The restart: mariadb-admin shutdown, a new process, the log switched on again.
    rec(76, 3228, T(8, 48, 20), 104, "Connect", b"root@localhost on  using Socket", **socket("root")),
    rec(77, 3277, T(8, 48, 20), 104, "Query", b"SHOW VARIABLES LIKE 'pid_file'"),
    rec(78, 3323, T(8, 48, 20), 104, "Shutdown", b""),
    start(79, 3342, MARIADB),
    rec(82, 3508, T(8, 48, 22), 4, "Quit", b""),
    # 7. bob deletes with and without WHERE, drops, and sends two statements at once.
    rec(83, 3537, T(8, 48, 22), 5, "Connect", b"bob@127.0.0.1 on  using TCP/IP", **tcp("bob")),
    rec(84, 3585, T(8, 48, 22), 5, "Query", b"SELECT DATABASE()"),
    rec(85, 3618, T(8, 48, 22), 5, "Init DB", b"shop"),
    rec(86, 3640, T(8, 48, 22), 5, "Query", b"SELECT * FROM orders WHERE customer_id = 3"),
    rec(87, 3698, T(8, 48, 22), 5, "Query", b"DELETE FROM orders WHERE id = 3"),
    rec(88, 3745, T(8, 48, 22), 5, "Query", b"DELETE FROM orders"),
    rec(89, 3779, T(8, 48, 22), 5, "Query", b"DROP TABLE scratch"),
    rec(
        90,
        3813,
        T(8, 48, 22),
        5,
        "Query",
        b"UPDATE customers SET email = NULL WHERE id = 2; DELETE FROM orders_archive",
    ),
    rec(91, 3903, T(8, 48, 22), 5, "Quit", b""),
    rec(
        92, 3918, T(8, 48, 23), 6, "Connect", b"alice@127.0.0.1 on shop using TCP/IP", **tcp("alice", "shop")
    ),
    rec(
        93,
        3986,
        T(8, 48, 23),
        6,
        "Query",
        b"UPDATE customers\n   SET email = 'ann@example.org'\n WHERE id = 1",
    ),
    rec(96, 4065, T(8, 48, 23), 6, "Query", b"TRUNCATE TABLE orders_archive"),
    rec(97, 4110, T(8, 48, 23), 6, "Quit", b""),
    # 8. root switches the log off.
    rec(98, 4125, T(8, 48, 24), 7, "Connect", b"root@localhost on  using Socket", **socket("root")),
    rec(99, 4188, T(8, 48, 24), 7, "Query", b"SET GLOBAL general_log = OFF"),
]


def test_it_parses_every_item_of_the_mariadb_scenario() -> None:
    assert views(parse(SCENARIO.read_bytes())) == SCENARIO_EXPECTED


def test_it_parses_the_mariadb_slap_log_with_nul_terminated_statements() -> None:
    items = parse(SLAP.read_bytes())
    records = [i for i in items if isinstance(i, LogRecord)]
    assert views(items[:1]) == [start(1, 0, MARIADB)]
    assert len(records) == len(items) - 1 == 319
    assert Counter(r.command for r in records) == {"Query": 304, "Connect": 7, "Quit": 7, "Init DB": 1}
    # 17 switched the log on, 18 set the schema up, 19-23 are the 5 clients (Connect, 40
    # queries, Quit each: 200 queries), 24 switched the log off.
    assert Counter(r.connection_id for r in records) == {
        17: 1,
        18: 106,
        19: 42,
        20: 42,
        21: 42,
        22: 42,
        23: 42,
        24: 2,
    }
    for cid in range(19, 24):
        mine = [r for r in records if r.connection_id == cid]
        assert [r.command for r in mine] == ["Connect"] + ["Query"] * 40 + ["Quit"]
        assert (mine[0].user, mine[0].host, mine[0].database, mine[0].status) == (
            "root",
            "127.0.0.1",
            "mysqlslap",
            None,
        )
    # mariadb-slap ends its statements with a NUL byte; the argument keeps it.
    assert sum(r.argument.endswith(b"\x00") for r in records) == 300
    assert {r.occurred_at for r in records} == {T(8, 49, 1)}
    by_line = {r.line: r for r in records}
    assert view(by_line[9]) == rec(
        9, 361, T(8, 49, 1), 18, "Query", b"CREATE TABLE `t1` (intcol1 INT(32) ,charcol1 VARCHAR(128))\x00"
    )
    assert view(by_line[109]) == rec(
        109,
        18196,
        T(8, 49, 1),
        23,
        "Connect",
        b"root@127.0.0.1 on mysqlslap using TCP/IP",
        **tcp("root", "mysqlslap"),
    )
    assert view(by_line[114]) == rec(
        114,
        18486,
        T(8, 49, 1),
        22,
        "Query",
        b"INSERT INTO t1 VALUES"
        b" (100669,'qnMdipW5KkXdTjGCh2PNzLoeR0527frpQDQ8uw67Ydk1K06uuNHtkxYBxT5w8plb2BbpzhwYBgPNYX9R"
        b"mICWGkZD6fAESvhMzH3yqzMtXoH4BQNylbK1CmEIPGYlC6')\x00",
    )
    assert view(by_line[322]) == rec(322, 42604, T(8, 49, 1), 24, "Query", b"SET GLOBAL general_log = OFF")


# -- layouts and quirks, one at a time ------------------------------------------------------


def test_it_carries_the_old_layout_time_forward_and_starts_with_none() -> None:
    items = parse(
        b"\t\t    1 Query\tSELECT 1\n"
        b"261122  8:08:51\t    1 Query\tSELECT 2\n"
        b"\t\t    2 Query\tSELECT 3\n"
        b"261122 18:08:52\t    1 Quit\t\n"
    )
    assert [i.occurred_at for i in items] == [
        None,
        datetime(2026, 11, 22, 8, 8, 51),
        datetime(2026, 11, 22, 8, 8, 51),
        datetime(2026, 11, 22, 18, 8, 52),
    ]


def test_it_keeps_the_carried_time_across_a_banner_that_reopens_the_log() -> None:
    # MariaDB on SET GLOBAL general_log=ON within the same second prints no time again.
    items = parse(
        b"261122  8:08:51\t    11 Query\tselect 1\n"
        b"/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:\n"
        b"Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\n"
        b"Time\t\t    Id Command\tArgument\n"
        b"\t\t    13 Query\tselect 2\n"
    )
    assert [type(i).__name__ for i in items] == ["LogRecord", "ServerStart", "LogRecord"]
    assert items[2].occurred_at == datetime(2026, 11, 22, 8, 8, 51)
    assert items[1].raw.count(b"\n") == 3


def test_it_reads_a_windows_banner_and_a_banner_without_its_header_lines() -> None:
    items = parse(
        b"C:\\Program Files\\MySQL\\bin\\mysqld.exe, Version: 8.0.36 (MySQL Community Server - GPL)."
        b" started with:\r\n"
        b"TCP Port: 3306, Named Pipe: MySQL\r\n"
        b"Time                 Id Command    Argument\r\n"
        b"2024-01-02T03:04:05.123456Z\t    8 Connect\troot@localhost on  using SSL/TLS\r\n"
        b"/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
        b"2024-01-02T03:04:06.000001Z\t    1 Query\tSELECT 1\n"
    )
    assert views(items) == [
        start(1, 0, "8.0.36 (MySQL Community Server - GPL)"),
        rec(
            4,
            182,
            datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
            8,
            "Connect",
            b"root@localhost on  using SSL/TLS",
            user="root",
            host="localhost",
            extra={"connection_type": "SSL/TLS"},
        ),
        start(5, 258, "8.0.36 (MySQL Community Server - GPL)"),
        rec(6, 338, datetime(2024, 1, 2, 3, 4, 6, 1, tzinfo=UTC), 1, "Query", b"SELECT 1"),
    ]


# Every two-word and one-word command, as 5.1+ and MariaDB write it ("\t\t" for the time,
# the id, one space, the command, a tab, the argument).
TWO_AND_ONE_WORD = [
    "Init DB",
    "Close stmt",
    "Change user",
    "Long Data",
    "Reset stmt",
    "Binlog Dump",
    "Binlog Dump GTID",
    "Delayed insert",
    "Register Slave",
    "Set option",
    "Create DB",
    "Drop DB",
    "Field List",
    "Table Dump",
    "Connect Out",
    "Reset connection",
    "Refresh",
    "Shutdown",
    "Statistics",
    "Processlist",
    "Kill",
    "Debug",
    "Ping",
    "Time",
    "Daemon",
    "Error",
    "Fetch",
    "Prepare",
    "Execute",
    "Quit",
    "Sleep",
]


@pytest.mark.parametrize("command", TWO_AND_ONE_WORD)
def test_it_reads_every_command_name(command: str) -> None:
    items = parse(f"\t\t    7 {command}\targ {command}\n\t\t    7 Quit\t\n".encode())
    assert [(i.command, i.connection_id, i.argument) for i in items] == [
        (command, 7, f"arg {command}".encode()),
        ("Quit", 7, b""),
    ]


@pytest.mark.parametrize(
    ("line", "command", "argument"),
    [
        # MySQL 5.0 pads the command to 11 columns: one space after an 11-letter one.
        (b"051007 21:55:24\t     42 Change user bob@h on db\n", "Change user", b"bob@h on db"),
        (b"\t\t     42 Init DB     shop\n", "Init DB", b"shop"),
        (b"\t\t     42 Quit\n", "Quit", b""),
        # A server newer than our list of commands: the time makes it a record anyway.
        (b"2024-01-02T03:04:05.000001Z\t   42 Subscribe Group\tx\n", "Subscribe Group", b"x"),
    ],
)
def test_it_reads_padded_and_unknown_commands(line: bytes, command: str, argument: bytes) -> None:
    (item,) = parse(line)
    assert (item.command, item.connection_id, item.argument) == (command, 42, argument)


def test_it_keeps_5_0_argument_spaces_beyond_the_command_padding() -> None:
    (item,) = parse(b"\t\t     42 Query         SELECT 1  \n")
    assert item.argument == b"  SELECT 1  "


def test_it_does_not_take_an_unknown_untimed_command_for_a_record() -> None:
    items = parse(b"\t\t    1 Query\tSELECT 1,\n\t\t    2 Frobnicate\tx\n")
    assert [i.argument for i in items] == [b"SELECT 1,\n\t\t    2 Frobnicate\tx"]


@pytest.mark.parametrize(
    ("argument", "fields"),
    [
        (
            b"alice@10.0.0.5 on shop using TCP/IP",
            {
                "user": "alice",
                "host": "10.0.0.5",
                "ip": "10.0.0.5",
                "database": "shop",
                "extra": {"connection_type": "TCP/IP"},
            },
        ),
        (
            b"root@localhost on  using Socket",
            {"user": "root", "host": "localhost", "extra": {"connection_type": "Socket"}},
        ),
        (
            b"joe@db.example.com as anonymous on sales",
            {
                "user": "joe",
                "host": "db.example.com",
                "database": "sales",
                "extra": {"authenticated_as": "anonymous"},
            },
        ),
        (
            b"nobody@localhost as  on ",
            {"user": "nobody", "host": "localhost", "extra": {"authenticated_as": ""}},
        ),
        (b"root@localhost on", {"user": "root", "host": "localhost"}),
        (b"root@localhost", {"user": "root", "host": "localhost"}),
        (
            b"odd@name@::1 on my db using TCP/IP",
            {
                "user": "odd@name",
                "host": "::1",
                "ip": "::1",
                "database": "my db",
                "extra": {"connection_type": "TCP/IP"},
            },
        ),
        (
            b"Access denied for user 'x'@'h' (using password: YES)",
            {"user": "x", "host": "h", "status": "denied", "extra": {"using_password": "YES"}},
        ),
        (
            b"Access denied for user 'o''brien'@'192.168.1.9' to database 'hr'",
            {
                "user": "o''brien",
                "host": "192.168.1.9",
                "ip": "192.168.1.9",
                "database": "hr",
                "status": "denied",
            },
        ),
        (b"Access denied, mangled", {"status": "denied"}),
        (b"\xff\xfeuser@host on db", {"user": "\ufffd\ufffduser", "host": "host", "database": "db"}),
        (b"not a connect line at all", {}),
        (b"x" * 5000 + b"@host on db", {}),  # longer than any real Connect: not parsed
    ],
)
def test_it_reads_who_connects_from_every_connect_form(argument: bytes, fields: dict[str, Any]) -> None:
    (item,) = parse(b"\t\t    3 Connect\t" + argument + b"\n")
    assert view(item) == rec(1, 0, None, 3, "Connect", argument, **fields)


def test_it_says_denied_only_on_the_refusal_not_on_the_login_attempt_before_it() -> None:
    # MariaDB: the attempt is logged before it is checked; whether it failed can be
    # decided only by what follows, possibly much later (a live log), so not here.
    items = parse(
        b"\t\t    5 Connect\teve@127.0.0.1 on  using TCP/IP\n"
        b"\t\t    5 Connect\tAccess denied for user 'eve'@'127.0.0.1' (using password: YES)\n"
    )
    assert [(i.user, i.status) for i in items] == [("eve", None), ("eve", "denied")]


# -- hostile bytes ----------------------------------------------------------------------------


def test_it_yields_nothing_for_empty_input() -> None:
    assert parse(b"") == []
    assert list(general_log.parse([b"", b""])) == []


def test_it_keeps_nul_bytes_and_invalid_utf8_in_the_argument() -> None:
    items = parse(b"\t\t    1 Query\tSELECT '\xff\xfe\x00'\x00\n\t\t    1 Query\t\x00\n")
    assert [i.argument for i in items] == [b"SELECT '\xff\xfe\x00'\x00", b"\x00"]


def test_it_reads_crlf_lines_and_keeps_inner_crlf() -> None:
    data = (
        b"261122  8:08:51\t    1 Connect\tann@localhost on shop using Socket\r\n"
        b"\t\t    1 Query\tSELECT 1,\r\n  2\r\n"
        b"\t\t    1 Quit\t\r\n"
    )
    items = parse(data)
    assert [(i.command, i.argument, i.database, i.extra) for i in items] == [
        ("Connect", b"ann@localhost on shop using Socket", "shop", {"connection_type": "Socket"}),
        ("Query", b"SELECT 1,\r\n  2", None, {}),
        ("Quit", b"", None, {}),
    ]


def test_it_reads_one_line_crlf_records_in_the_middle_of_a_log() -> None:
    items = parse(b"\t\t    1 Query\tSELECT 1\r\n\t\t    1 Quit\t\r\n\t\t    2 Query\tSELECT\r\n")
    assert [i.argument for i in items] == [b"SELECT 1", b"", b"SELECT"]


def test_it_reads_a_last_line_without_newline() -> None:
    items = parse(b"\t\t    1 Query\tSELECT 1\n\t\t    1 Query\tSELECT\n 2")
    assert [i.argument for i in items] == [b"SELECT 1", b"SELECT\n 2"]
    assert [i.argument for i in parse(b"\t\t    1 Quit")] == [b""]


def test_it_reads_a_5_mb_statement_in_one_record() -> None:
    huge = b"INSERT INTO t VALUES ('" + b"x" * 5_000_000 + b"')"
    items = parse(b"\t\t    1 Query\t" + huge + b"\n\t\t    1 Quit\t\n")
    assert [len(i.argument) for i in items] == [len(huge), 0]


def test_it_reports_garbage_before_the_first_record_as_one_bounded_problem() -> None:
    garbage = b"\x89PNG\r\n\x1a\n" + b"\xff" * 5_000_000 + b"\nnot a log either\n"
    items = parse(garbage + b"\t\t    1 Query\tSELECT 1\n")
    assert len(items) == 2
    problem, record = items
    assert isinstance(problem, Problem)
    assert (problem.line, problem.offset, problem.raw) == (1, 0, garbage[:PROBLEM_EXCERPT_BYTES])
    assert problem.reason == (
        f"not a general log record, and no record before it to continue: 4 lines, {len(garbage)} bytes"
        f" (the first {PROBLEM_EXCERPT_BYTES} kept here)"
    )
    assert (record.line, record.offset) == (5, len(garbage))


def test_it_reports_lines_between_a_banner_and_the_next_record() -> None:
    data = (
        b"\t\t    1 Query\tSELECT 1\n"
        b"/usr/sbin/mysqld, Version: 5.6.51-log (MySQL Community Server (GPL)). started with:\n"
        b"Tcp port: 3306  Unix socket: /tmp/mysql.sock\n"
        b"Time                 Id Command    Argument\n"
        b"stray line\n"
        b"261122  8:08:51\t    1 Query\tSELECT 2\n"
    )
    assert [(type(i).__name__, i.line) for i in parse(data)] == [
        ("LogRecord", 1),
        ("ServerStart", 2),
        ("Problem", 5),
        ("LogRecord", 6),
    ]


def test_it_keeps_a_record_with_an_impossible_time_and_says_why() -> None:
    items = parse(
        b"261122  8:08:51\t    1 Query\tSELECT 1\n"
        b"261322  8:08:52\t    1 Query\tSELECT 2\n"  # month 13
        b"\t\t    1 Query\tSELECT 3\n"  # logged in that same (unknowable) second
        b"2026-02-30T01:02:03.000004Z\t    1 Query\tSELECT 4\n"  # 30 February
        b"261122  8:08:53\t    1 Query\tSELECT 5\n"
    )
    assert [(type(i).__name__, i.line, getattr(i, "occurred_at", "-")) for i in items] == [
        ("LogRecord", 1, datetime(2026, 11, 22, 8, 8, 51)),
        ("Problem", 2, "-"),
        ("LogRecord", 2, None),
        ("LogRecord", 3, None),
        ("Problem", 4, "-"),
        ("LogRecord", 4, None),
        ("LogRecord", 5, datetime(2026, 11, 22, 8, 8, 53)),
    ]
    assert items[1].reason.startswith("invalid time '261322  8:08:52' (month must be in 1..12)")
    assert items[2].extra == {"invalid_time": "261322  8:08:52"}


# -- resuming ---------------------------------------------------------------------------------


def _lines(data: bytes) -> list[bytes]:
    return io.BytesIO(data).readlines()


# Every general log our own MariaDB wrote (tests/fixtures/*/regenerate.py): restarts, logging
# switched off and on, multi-line and binary statements, rotation, a mariadb-slap load.
# (the path inside tests/fixtures only: a checkout's own folder may be called "auditweb")
OWN_GENERAL_LOGS = sorted(
    name
    for name in (str(path.relative_to(FIXTURES.parent)) for path in FIXTURES.parent.glob("*/mariadb-*"))
    if name.endswith((".log", ".log.1")) and "audit" not in name and "syslog" not in name
)


def _assert_same_items_in_two_halves(data: bytes) -> None:
    whole = list(general_log.parse(_lines(data)))
    for item in whole[1:]:
        # Split where this item starts: the first parser ends, the second begins there.
        first = GeneralLogParser()
        head = [*first.feed(_lines(data[: item.offset])), *first.finish()]
        point = first.resume_point()
        assert (point.offset, point.line) == (item.offset, item.line)
        tail = list(
            general_log.parse(
                _lines(data[item.offset :]),
                start_offset=point.offset,
                start_line=point.line,
                hints=Hints(last_time=point.last_time),
            )
        )
        assert head + tail == whole


def test_the_own_general_logs_are_all_there() -> None:
    assert len(OWN_GENERAL_LOGS) >= 7
    assert "genlog/mariadb-10.11.19-scenario.log" in OWN_GENERAL_LOGS


@pytest.mark.parametrize("name", OWN_GENERAL_LOGS)
def test_it_gives_the_same_items_when_a_file_is_parsed_in_two_halves(name: str) -> None:
    _assert_same_items_in_two_halves((FIXTURES.parent / name).read_bytes())


@pytest.mark.shared
def test_it_gives_the_same_items_when_a_corpus_sample_is_parsed_in_two_halves() -> None:
    """The MySQL 5.0, 5.1 and 5.7 layouts, which MariaDB here does not write."""
    for name in sorted(CORPUS_EXPECTED):
        _assert_same_items_in_two_halves(corpus(name))


def test_it_resumes_where_the_caller_stopped_after_any_item() -> None:
    data = SCENARIO.read_bytes() + b"garbage after\n" + SCENARIO.read_bytes().replace(b"261122", b"261399", 1)
    whole = list(general_log.parse(_lines(data)))
    for stop in range(1, len(whole)):
        parser = GeneralLogParser()
        taken = []
        for item in parser.feed(_lines(data)):
            taken.append(item)
            if len(taken) == stop:
                break
        point = parser.resume_point()
        rest = list(
            general_log.parse(
                _lines(data[point.offset :]),
                start_offset=point.offset,
                start_line=point.line,
                hints=Hints(last_time=point.last_time),
            )
        )
        # A time Problem may be said again after resuming at its record; nothing is lost.
        assert [i for i in taken + rest if not is_time_note(i)] == [i for i in whole if not is_time_note(i)]


def test_it_gives_the_same_items_fed_line_by_line() -> None:
    data = SCENARIO.read_bytes()
    parser = GeneralLogParser()
    items = [item for line in _lines(data) for item in parser.feed([line])]
    items += parser.finish()
    assert items == list(general_log.parse(_lines(data)))
