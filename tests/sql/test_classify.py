"""The SQL classifier on its own: plain strings in, classifications out. No Django, no database."""

from __future__ import annotations

import importlib
import time

import pytest

from ingest.sql import Classification, classify, clear_cache, fingerprint, use_database
from ingest.sql import statements as statements_module

classify_module = importlib.import_module("ingest.sql.classify")


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_cache()


def flags_of(sql: str, database: str | None = "shop") -> frozenset[str]:
    return classify(sql, database).flags


# (sql, current database) -> (statement type, tables, destructive, flags)
CASES = [
    # Deletes and updates
    ("DELETE FROM orders WHERE id = 7", "shop", "DELETE", ("shop.orders",), True, set()),
    ("delete from orders where 1=1", "shop", "DELETE", ("shop.orders",), True, {"no_where"}),
    ("DELETE FROM shop.orders LIMIT 10", None, "DELETE", ("shop.orders",), True, {"no_where"}),
    ("DELETE FROM `shop`.`orders`", "other", "DELETE", ("shop.orders",), True, {"no_where"}),
    (
        "DELETE t FROM orders t JOIN customers c ON c.id = t.customer_id WHERE c.country = 'XX'",
        "shop",
        "DELETE",
        ("shop.customers", "shop.orders"),
        True,
        {"multi_table"},
    ),
    (
        "DELETE FROM t1, t2 USING t1 INNER JOIN t2 INNER JOIN t3 WHERE t1.id = t2.id",
        "db",
        "DELETE",
        ("db.t1", "db.t2", "db.t3"),
        True,
        {"multi_table"},
    ),
    ("DELETE LOW_PRIORITY QUICK IGNORE FROM t WHERE a = 1", "db", "DELETE", ("db.t",), True, set()),
    (
        "UPDATE a JOIN b ON a.id = b.id SET a.x = 1",
        "db",
        "UPDATE",
        ("db.a", "db.b"),
        True,
        {"multi_table", "no_where"},
    ),
    ("UPDATE a, b SET a.x = b.y WHERE a.id = b.id", "db", "UPDATE", ("db.a", "db.b"), True, {"multi_table"}),
    ("UPDATE orders SET status = 'void' WHERE TRUE", "shop", "UPDATE", ("shop.orders",), True, {"no_where"}),
    ("update orders set paid = 0 where id = 3", "shop", "UPDATE", ("shop.orders",), True, set()),
    (
        "UPDATE t1 SET a = (SELECT max(b) FROM t2) WHERE id = 1",
        "db",
        "UPDATE",
        ("db.t1", "db.t2"),
        True,
        set(),
    ),
    (
        "WITH old AS (SELECT id FROM orders WHERE y < 9) DELETE FROM orders WHERE id IN (SELECT id FROM old)",
        "shop",
        "DELETE",
        ("shop.orders",),
        True,
        set(),
    ),
    # Inserts, replaces, loads
    (
        "INSERT INTO t1 VALUES (1804289383,'mxvtvmC9127qJNm06')",
        "mysqlslap",
        "INSERT",
        ("mysqlslap.t1",),
        False,
        set(),
    ),
    ("insert into t (a, b) values (1, 'x'), (2, 'y')", "db", "INSERT", ("db.t",), False, set()),
    ("INSERT INTO t (a) SELECT b FROM u WHERE c > 1", "db", "INSERT", ("db.t", "db.u"), False, set()),
    ("INSERT IGNORE INTO t SET a = 1", "db", "INSERT", ("db.t",), False, set()),
    ("REPLACE INTO t (a) VALUES (1)", "db", "REPLACE", ("db.t",), True, set()),
    ("REPLACE LOW_PRIORITY t VALUES (1)", "db", "REPLACE", ("db.t",), True, set()),
    (
        "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)",
        "db",
        "INSERT",
        ("db.t",),
        True,
        set(),
    ),
    ("LOAD DATA INFILE '/tmp/x.csv' REPLACE INTO TABLE t", "db", "LOAD DATA", ("db.t",), True, set()),
    ("LOAD DATA LOCAL INFILE '/tmp/x.csv' INTO TABLE t", "db", "LOAD DATA", ("db.t",), False, set()),
    # Reads
    (
        "SELECT intcol1,intcol2,charcol1 FROM t1 WHERE id = '42'",
        "mysqlslap",
        "SELECT",
        ("mysqlslap.t1",),
        False,
        set(),
    ),
    ("SELECT 1", None, "SELECT", (), False, set()),
    ("select @@version_comment limit 1", None, "SELECT", (), False, set()),
    ("SELECT * FROM (SELECT a FROM x) s JOIN y ON s.a = y.a", "db", "SELECT", ("db.x", "db.y"), False, set()),
    (
        "SELECT * FROM `db`.`t` x WHERE EXISTS (SELECT 1 FROM z WHERE z.a = x.a)",
        "db2",
        "SELECT",
        ("db.t", "db2.z"),
        False,
        set(),
    ),
    (
        "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
        "db",
        "SELECT",
        (),
        False,
        set(),
    ),
    ("SELECT a INTO OUTFILE '/tmp/out' FROM t", "db", "SELECT", ("db.t",), False, set()),
    ("SELECT a INTO @x FROM t", "db", "SELECT", ("db.t",), False, set()),
    ("SELECT * FROM t FOR UPDATE", "db", "SELECT", ("db.t",), False, set()),
    ("TABLE t", "db", "SELECT", ("db.t",), False, set()),
    ("SELECT * FROM Orders", "shop", "SELECT", ("shop.Orders",), False, set()),
    (
        "SELECT * FROM INFORMATION_SCHEMA.TABLES",
        "shop",
        "SELECT",
        ("information_schema.tables",),
        False,
        set(),
    ),
    ("EXPLAIN DELETE FROM t", "db", "EXPLAIN", ("db.t",), False, set()),
    ("DESCRIBE t", "db", "DESCRIBE", ("db.t",), False, set()),
    # DDL
    ("TRUNCATE TABLE orders", "shop", "TRUNCATE", ("shop.orders",), True, set()),
    ("DROP TABLE IF EXISTS a, other.b", "db", "DROP TABLE", ("db.a", "other.b"), True, set()),
    ("DROP TEMPORARY TABLE tmp", "db", "DROP TABLE", ("db.tmp",), False, set()),
    ("DROP DATABASE shop", None, "DROP DATABASE", ("shop.*",), True, set()),
    ("DROP SCHEMA IF EXISTS `shop`", "x", "DROP DATABASE", ("shop.*",), True, set()),
    ("DROP VIEW v_orders", "shop", "DROP VIEW", ("shop.v_orders",), True, set()),
    ("DROP INDEX idx ON orders", "shop", "DROP INDEX", ("shop.orders",), False, set()),
    ("ALTER TABLE t ADD COLUMN c INT", "db", "ALTER TABLE", ("db.t",), False, set()),
    ("ALTER TABLE t DROP COLUMN c", "db", "ALTER TABLE", ("db.t",), True, set()),
    ("ALTER TABLE t DROP c", "db", "ALTER TABLE", ("db.t",), True, set()),
    ("ALTER TABLE t MODIFY COLUMN c TINYINT", "db", "ALTER TABLE", ("db.t",), True, set()),
    ("ALTER TABLE t CHANGE COLUMN c d INT", "db", "ALTER TABLE", ("db.t",), True, set()),
    ("ALTER TABLE t DROP PARTITION p2019", "db", "ALTER TABLE", ("db.t",), True, set()),
    ("ALTER TABLE t TRUNCATE PARTITION p2019", "db", "ALTER TABLE", ("db.t",), True, set()),
    ("ALTER TABLE t ENGINE = BLACKHOLE", "db", "ALTER TABLE", ("db.t",), True, set()),
    ("ALTER TABLE t DROP INDEX i, ADD INDEX j (a)", "db", "ALTER TABLE", ("db.t",), False, set()),
    ("ALTER TABLE t ADD COLUMN `drop` INT", "db", "ALTER TABLE", ("db.t",), False, set()),
    ("ALTER TABLE t ALTER COLUMN c DROP DEFAULT", "db", "ALTER TABLE", ("db.t",), False, set()),
    ("ALTER TABLE t RENAME TO t_old", "db", "ALTER TABLE", ("db.t", "db.t_old"), True, set()),
    ("RENAME TABLE a TO b", "db", "RENAME TABLE", ("db.a", "db.b"), True, set()),
    (
        "RENAME TABLE a TO a_old, a_new TO a",
        "db",
        "RENAME TABLE",
        ("db.a", "db.a_new", "db.a_old"),
        True,
        set(),
    ),
    ("CREATE TABLE t2 LIKE t1", "db", "CREATE TABLE", ("db.t1", "db.t2"), False, set()),
    ("CREATE TABLE t2 AS SELECT * FROM t1", "db", "CREATE TABLE", ("db.t1", "db.t2"), False, set()),
    ("CREATE TABLE IF NOT EXISTS t2 (id INT PRIMARY KEY)", "db", "CREATE TABLE", ("db.t2",), False, set()),
    ("CREATE OR REPLACE TABLE t2 (a INT)", "db", "CREATE TABLE", ("db.t2",), True, set()),
    ("CREATE DATABASE shop2", None, "CREATE DATABASE", ("shop2.*",), False, set()),
    # Executable comments are SQL
    ("/*!40101 SET NAMES utf8mb4 */", None, "SET", (), False, set()),
    ("/*!50001 DROP TABLE IF EXISTS `v_orders`*/", "shop", "DROP TABLE", ("shop.v_orders",), True, set()),
    ("/*M!100101 DELETE FROM t */", "db", "DELETE", ("db.t",), True, {"no_where"}),
    ("/* DELETE FROM t */ SELECT 1", "db", "SELECT", (), False, set()),
    # Several statements in one string
    ("SELECT 1; DELETE FROM t; SELECT 2", "db", "DELETE", ("db.t",), True, {"multi_statement", "no_where"}),
    ("SELECT ';' AS x FROM t", "db", "SELECT", ("db.t",), False, set()),
    ("SELECT 'it''s; fine' FROM t", "db", "SELECT", ("db.t",), False, set()),
    ("SELECT 1 -- ; DELETE FROM t", "db", "SELECT", (), False, set()),
    ("SELECT 1 /* ; DELETE FROM t */", "db", "SELECT", (), False, set()),
    # Session, transactions, everything else
    ("SET autocommit = 0", None, "SET", (), False, set()),
    ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", None, "SET", (), False, set()),
    ("USE shop", None, "USE", (), False, set()),
    ("SHOW TABLES", "shop", "SHOW", (), False, set()),
    ("BEGIN", None, "BEGIN", (), False, set()),
    ("START TRANSACTION", None, "BEGIN", (), False, set()),
    ("COMMIT", None, "COMMIT", (), False, set()),
    ("ROLLBACK", None, "ROLLBACK", (), False, set()),
    ("CALL shop.cleanup(30)", "shop", "CALL", (), False, {"routine"}),
    ("PREPARE s FROM @sql", None, "PREPARE", (), False, set()),
    ("EXECUTE s", None, "EXECUTE", (), False, set()),
    ("LOCK TABLES t1 READ, t2 AS x WRITE", "db", "LOCK TABLES", ("db.t1", "db.t2"), False, set()),
    ("FLUSH LOGS", None, "FLUSH", (), False, set()),
    ("KILL 42", None, "KILL", (), False, set()),
    # Privileges
    ("GRANT ALL ON shop.* TO 'u'@'%'", None, "GRANT", ("shop.*",), False, {"privilege_change"}),
    ("GRANT SELECT ON orders TO 'u'@'%'", "shop", "GRANT", ("shop.orders",), False, {"privilege_change"}),
    ("REVOKE ALL PRIVILEGES ON *.* FROM 'u'@'%'", None, "REVOKE", ("*.*",), False, {"privilege_change"}),
    ("CREATE USER 'eve'@'%' IDENTIFIED BY 'pw'", None, "CREATE USER", (), False, {"privilege_change"}),
    ("ALTER USER 'eve'@'%' IDENTIFIED BY 'pw2'", None, "ALTER USER", (), False, {"privilege_change"}),
    ("DROP USER 'eve'@'%'", None, "DROP USER", (), False, {"privilege_change"}),
    ("RENAME USER 'a'@'%' TO 'b'@'%'", None, "RENAME USER", (), False, {"privilege_change"}),
    ("SET PASSWORD FOR 'root'@'localhost' = 'x'", None, "SET PASSWORD", (), False, {"privilege_change"}),
    (
        "UPDATE mysql.user SET authentication_string = '' WHERE user = 'root'",
        None,
        "UPDATE",
        ("mysql.user",),
        True,
        {"privilege_change"},
    ),
    # Covering the tracks
    ("TRUNCATE mysql.general_log", None, "TRUNCATE", ("mysql.general_log",), True, {"anti_forensic"}),
    ("TRUNCATE TABLE general_log", "mysql", "TRUNCATE", ("mysql.general_log",), True, {"anti_forensic"}),
    ("DROP TABLE mysql.slow_log", None, "DROP TABLE", ("mysql.slow_log",), True, {"anti_forensic"}),
    (
        "ALTER TABLE mysql.general_log ENGINE = MyISAM",
        None,
        "ALTER TABLE",
        ("mysql.general_log",),
        False,
        {"anti_forensic"},
    ),
    ("SET GLOBAL general_log = 'OFF'", None, "SET", (), False, {"anti_forensic"}),
    (
        "PURGE BINARY LOGS BEFORE '2026-01-01 00:00:00'",
        None,
        "PURGE BINARY LOGS",
        (),
        False,
        {"anti_forensic"},
    ),
    ("RESET MASTER", None, "RESET MASTER", (), False, {"anti_forensic"}),
    ("UNINSTALL PLUGIN server_audit", None, "UNINSTALL PLUGIN", (), False, {"anti_forensic"}),
    # Nothing there, or nothing we know
    ("", None, "", (), False, set()),
    ("  ;\x00", None, "", (), False, set()),
    ("/* just a comment */", None, "", (), False, set()),
    ("Hello, is this thing on?", None, "UNKNOWN", (), False, {"unparsed"}),
]


@pytest.mark.parametrize(
    ("sql", "database", "statement_type", "tables", "destructive", "flags"),
    CASES,
    ids=[f"{i:03d}-{case[0][:40]}" for i, case in enumerate(CASES)],
)
def test_it_classifies_each_statement_as_expected(
    sql, database, statement_type, tables, destructive, flags
) -> None:
    c = classify(sql, database)
    assert (c.statement_type, c.tables, c.destructive, set(c.flags)) == (
        statement_type,
        tables,
        destructive,
        flags,
    )


def test_cached_answers_equal_fresh_ones_in_any_order() -> None:
    fresh = [classify(sql, db) for sql, db, *_ in CASES]
    again = [classify(sql, db) for sql, db, *_ in reversed(CASES)]
    assert again[::-1] == fresh


def test_it_returns_the_agreed_shape() -> None:
    c = classify("DELETE FROM orders WHERE id = 1", "shop")
    assert isinstance(c, Classification)
    assert isinstance(c.tables, tuple) and isinstance(c.flags, frozenset)
    with pytest.raises(AttributeError):
        c.destructive = False


# --- no_where -----------------------------------------------------------------


def test_it_flags_delete_without_where() -> None:
    assert "no_where" in flags_of("DELETE FROM orders")


@pytest.mark.parametrize(
    "where",
    ["1=1", "1", "TRUE", "'a'='a'", "'a' = 'A '", "id = id", "id = 5 OR 1 = 1", "NOT 0", "(1)", "2 > 1"],
)
def test_an_always_true_where_counts_as_no_where(where: str) -> None:
    assert "no_where" in flags_of(f"DELETE FROM orders WHERE {where}")
    assert "no_where" in flags_of(f"UPDATE orders SET paid = 1 WHERE {where}")


@pytest.mark.parametrize(
    "where", ["1=0", "0", "FALSE", "'a'='b'", "NULL", "id = 5", "id = 5 AND 1 = 1", "'a'"]
)
def test_a_where_that_can_be_false_is_a_where(where: str) -> None:
    assert "no_where" not in flags_of(f"DELETE FROM orders WHERE {where}")


def test_a_limit_without_where_is_still_no_where() -> None:
    assert "no_where" in flags_of("DELETE FROM orders ORDER BY id LIMIT 10")
    assert "no_where" in flags_of("UPDATE orders SET paid = 0 LIMIT 1")


def test_literal_values_that_decide_the_answer_are_not_shared_between_statements() -> None:
    # Same key (`WHERE ?=?`, `general_log = ?`) both ways round: the cache must not mix them up.
    assert "no_where" in flags_of("DELETE FROM t WHERE 1=1")
    assert "no_where" not in flags_of("DELETE FROM t WHERE 1=0")
    assert "no_where" in flags_of("DELETE FROM t WHERE 1=1")
    assert "anti_forensic" not in flags_of("SET GLOBAL general_log = 'ON'")
    assert "anti_forensic" in flags_of("SET GLOBAL general_log = 'OFF'")
    assert "anti_forensic" not in flags_of("SET GLOBAL general_log = 'ON'")


# --- tables -----------------------------------------------------------------------


def test_it_resolves_aliases_to_the_table_it_deletes_from() -> None:
    c = classify("DELETE t FROM orders t JOIN customers c ON c.id = t.customer_id WHERE c.vip = 0", "shop")
    assert c.tables == ("shop.customers", "shop.orders")
    assert c.targets == ("shop.orders",)


def test_multi_table_delete_with_star_targets_names_both_tables() -> None:
    c = classify("DELETE a.*, b.* FROM x AS a JOIN y AS b ON a.i = b.i WHERE a.z = 1", "db")
    assert c.targets == ("db.x", "db.y") and "multi_table" in c.flags


def test_an_update_writes_only_the_table_whose_columns_it_sets() -> None:
    c = classify("UPDATE orders o JOIN customers c ON c.id = o.cid SET o.total = 0 WHERE c.id = 1", "shop")
    assert c.tables == ("shop.customers", "shop.orders")
    assert c.targets == ("shop.orders",)


def test_a_cte_name_is_not_a_table() -> None:
    c = classify("WITH orders AS (SELECT * FROM archive.orders) SELECT * FROM orders", "shop")
    assert c.tables == ("archive.orders",)


def test_unqualified_tables_take_the_callers_database_and_stay_bare_without_one() -> None:
    sql = "DELETE FROM orders WHERE id = 1"
    assert classify(sql, "shop").tables == ("shop.orders",)
    assert classify(sql, "billing").tables == ("billing.orders",)  # same cache entry, other database
    assert classify(sql, None).tables == ("orders",)
    assert classify(sql, "").tables == ("orders",)


def test_backticks_keep_unusual_names_whole() -> None:
    assert classify("SELECT * FROM `my db`.`order items`", None).tables == ("my db.order items",)
    assert classify("SELECT * FROM `a``b`", "db").tables == ("db.a`b",)
    assert classify("SELECT * FROM `2024`", "db").tables == ("db.2024",)


def test_table_names_keep_their_case() -> None:
    # lower_case_table_names=0 (Linux): Orders and orders are different tables.
    assert classify("SELECT * FROM Orders", "Shop").tables == ("Shop.Orders",)
    assert classify("SELECT * FROM orders", "Shop").tables == ("Shop.orders",)


def test_create_trigger_lists_the_tables_its_body_touches() -> None:
    c = classify(
        "CREATE DEFINER=`root`@`%` TRIGGER wipe AFTER INSERT ON orders FOR EACH ROW "
        "BEGIN DELETE FROM invoices WHERE order_id = NEW.id; END",
        "shop",
    )
    assert c.statement_type == "CREATE TRIGGER"
    assert c.tables == ("shop.invoices", "shop.orders")
    assert not c.destructive and {"routine", "destructive_body"} <= c.flags
    assert "multi_statement" not in c.flags  # the body's ";" does not split the definition


def test_statements_that_run_another_take_its_classification() -> None:
    c = classify("SET STATEMENT max_statement_time = 5 FOR DELETE FROM t", "db")
    assert (c.statement_type, c.tables, c.destructive) == ("DELETE", ("db.t",), True)
    c = classify("EXECUTE IMMEDIATE 'DROP TABLE t'", "db")
    assert (c.statement_type, c.tables, c.destructive) == ("EXECUTE", ("db.t",), True)
    c = classify("EXPLAIN ANALYZE DELETE FROM t WHERE id = 1", "db")
    assert (c.statement_type, c.destructive) == ("DELETE", True)


def test_prepare_names_the_tables_of_its_statement_but_runs_nothing() -> None:
    c = classify("PREPARE s FROM 'DELETE FROM orders WHERE id = ?'", "shop")
    assert (c.statement_type, c.tables, c.destructive) == ("PREPARE", ("shop.orders",), False)


# --- anti-forensic and privileges -----------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SET GLOBAL general_log = 'OFF'",
        "SET GLOBAL general_log = 0",
        "set @@global.general_log=off",
        "SET GLOBAL general_log = DEFAULT",
        "SET sql_log_off = 1",
        "SET SESSION sql_log_off = ON",
        "SET GLOBAL log_output = 'NONE'",
        "SET GLOBAL log_output = 'FILE,NONE'",
        "SET GLOBAL general_log_file = '/dev/null'",
        "SET sql_log_bin = 0",
        "SET @@SESSION.SQL_LOG_BIN = OFF",
        "SET GLOBAL server_audit_logging = OFF",
        "SET GLOBAL slow_query_log = 0",
        "SET autocommit = 1, GLOBAL general_log = 0",
        "UNINSTALL PLUGIN server_audit",
        "UNINSTALL PLUGIN audit_log",
        "UNINSTALL SONAME 'server_audit'",
        "PURGE BINARY LOGS TO 'mysql-bin.000042'",
        "PURGE MASTER LOGS BEFORE NOW()",
        "RESET MASTER",
        "TRUNCATE mysql.general_log",
        "DROP TABLE mysql.general_log",
        "RENAME TABLE mysql.general_log TO mysql.general_log_old, mysql.gl_new TO mysql.general_log",
        "DELETE FROM mysql.slow_log",
    ],
)
def test_it_flags_attempts_to_blind_the_logs(sql: str) -> None:
    assert "anti_forensic" in flags_of(sql, None)


@pytest.mark.parametrize(
    "sql",
    [
        "SET GLOBAL general_log = 'ON'",
        "SET GLOBAL general_log = 1",
        "SET sql_log_off = 0",
        "SET GLOBAL log_output = 'TABLE'",
        "SET sql_log_bin = 1",
        "SET @@SESSION.SQL_LOG_BIN = @MYSQLDUMP_TEMP_LOG_BIN",
        "FLUSH LOGS",
        "FLUSH BINARY LOGS",
        "SELECT * FROM mysql.general_log",
        "UNINSTALL PLUGIN validate_password",
        "SET @general_log = 0",
    ],
)
def test_it_does_not_flag_ordinary_log_housekeeping(sql: str) -> None:
    assert "anti_forensic" not in flags_of(sql, None)


@pytest.mark.parametrize(
    "sql",
    [
        "GRANT ALL PRIVILEGES ON *.* TO 'eve'@'%' WITH GRANT OPTION",
        "REVOKE SELECT ON shop.* FROM 'bob'@'%'",
        "CREATE USER 'eve'@'%'",
        "ALTER USER 'root'@'localhost' IDENTIFIED BY 'new'",
        "DROP USER 'bob'@'%'",
        "RENAME USER 'bob'@'%' TO 'robert'@'%'",
        "SET PASSWORD = 'x'",
        "INSERT INTO mysql.user (Host, User) VALUES ('%', 'eve')",
        "GRANT dba TO 'eve'@'%'",
    ],
)
def test_it_flags_privilege_changes(sql: str) -> None:
    assert "privilege_change" in flags_of(sql, None)


def test_call_is_flagged_as_a_routine() -> None:
    c = classify("CALL purge_old_orders(30)", "shop")
    assert c.statement_type == "CALL" and "routine" in c.flags and not c.destructive


# --- when sqlglot cannot parse -----------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "statement_type", "tables", "targets", "flags"),
    [
        ("DELETE FROM orders", "DELETE", ("shop.orders",), ("shop.orders",), {"no_where"}),
        ("DELETE FROM orders WHERE id = 1", "DELETE", ("shop.orders",), ("shop.orders",), set()),
        (
            "DELETE o FROM orders AS o JOIN customers c ON c.id = o.cid WHERE c.x = 1",
            "DELETE",
            ("shop.customers", "shop.orders"),
            ("shop.orders",),
            {"multi_table"},
        ),
        (
            "UPDATE archive.orders SET paid = 1 WHERE id = 2",
            "UPDATE",
            ("archive.orders",),
            ("archive.orders",),
            set(),
        ),
        (
            "INSERT INTO t SELECT * FROM u JOIN v ON u.a = v.a",
            "INSERT",
            ("shop.t", "shop.u", "shop.v"),
            ("shop.t",),
            set(),
        ),
        ("SELECT * FROM a, b AS x WHERE a.i = x.i FOR UPDATE", "SELECT", ("shop.a", "shop.b"), (), set()),
        (
            "WITH c AS (SELECT id FROM o) DELETE FROM o WHERE id IN (SELECT id FROM c)",
            "DELETE",
            ("shop.o",),
            ("shop.o",),
            set(),
        ),
    ],
)
def test_when_sqlglot_fails_tables_still_come_from_keywords(
    monkeypatch, sql, statement_type, tables, targets, flags
) -> None:
    monkeypatch.setattr(statements_module, "_parse", lambda sql: None)
    c = classify(sql, "shop")
    assert (c.statement_type, c.tables, c.targets) == (statement_type, tables, targets)
    assert set(c.flags) == flags | {"unparsed"}


# --- hostile input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "\x00",
        "\ufffd\ufffd\ufffd DELETE",
        "SELECT '\ufffd' FROM t WHERE x = '\x00'",
        "'unterminated string",
        "SELECT `unterminated",
        "SELECT /* unterminated comment",
        "DELETE FROM",
        "UPDATE",
        "(" * 5000,
        "SELECT " + "(" * 2000 + "1" + ")" * 2000,
        "INSERT INTO t VALUES " + "(",
        "DROP",
        "SET",
        "GRANT",
        ";;;",
        "\\",
        "/*!",
        "-- only a comment",
        "# only a comment",
        "SELECT 1\n\n\t  FROM\r\n t",
    ],
)
def test_it_never_raises_on_garbage(sql: str) -> None:
    c = classify(sql, "db")
    assert isinstance(c, Classification)
    assert isinstance(fingerprint(sql), str)


def test_a_bug_in_the_classifier_keeps_the_statement_instead_of_raising(monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(classify_module, "analyse", broken)
    c = classify("DELETE FROM orders WHERE id = 1", "shop")
    assert (c.statement_type, c.fingerprint) == ("UNKNOWN", "delete from orders where id = ?")
    assert {"unparsed", "unclassifiable"} <= c.flags
    monkeypatch.undo()
    assert classify("DELETE FROM orders WHERE id = 1", "shop").statement_type == "DELETE"  # not cached


def test_a_statement_ending_in_nul_is_classified_as_without_it() -> None:
    with_nul = classify("SELECT intcol1 FROM t1 WHERE id = '7'\x00", "mysqlslap")
    without = classify("SELECT intcol1 FROM t1 WHERE id = '7'", "mysqlslap")
    assert with_nul == without
    assert with_nul.tables == ("mysqlslap.t1",)


def test_a_one_megabyte_statement_is_read_by_keywords_without_the_parser(monkeypatch) -> None:
    monkeypatch.setattr(statements_module, "_parse", _no_parser)
    rows = ",".join(f"({i},'{'x' * 20}')" for i in range(40_000))
    sql = f"INSERT INTO orders VALUES {rows}"
    assert len(sql) > 1_000_000
    started = time.perf_counter()
    c = classify(sql, "shop")
    assert time.perf_counter() - started < 2.0
    assert (c.statement_type, c.tables, c.destructive) == ("INSERT", ("shop.orders",), False)
    assert {"unparsed", "truncated"} <= c.flags
    assert c.fingerprint.startswith("insert into orders values(?+)")


def test_a_huge_insert_is_destructive_when_its_tail_updates_duplicates() -> None:
    rows = ",".join(f"({i},'x')" for i in range(20_000))
    c = classify(f"INSERT INTO orders VALUES {rows} ON DUPLICATE KEY UPDATE b = VALUES(b)", "shop")
    assert c.destructive and c.tables == ("shop.orders",)


def test_a_huge_delete_still_names_its_table() -> None:
    ids = ",".join(str(i) for i in range(20_000))
    c = classify(f"DELETE FROM orders WHERE id IN ({ids})", "shop")
    assert (c.statement_type, c.tables, c.destructive) == ("DELETE", ("shop.orders",), True)
    assert "no_where" not in c.flags
    assert c.fingerprint == "delete from orders where id in(?+)"


# --- fingerprints -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM t WHERE id = 42", "select * from t where id = ?"),
        ("SELECT * FROM t WHERE name = 'O''Brien' AND x = \"y\"", "select * from t where name = ? and x = ?"),
        ("SELECT * FROM t WHERE s = 'a\\'b'", "select * from t where s = ?"),
        ("SELECT   *\n FROM\tt  WHERE id=1", "select * from t where id=?"),
        ("SELECT * FROM t WHERE id IN (1, 2, 3)", "select * from t where id in(?+)"),
        ("SELECT * FROM t WHERE id IN (1)", "select * from t where id in(?+)"),
        ("INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c')", "insert into t values(?+)"),
        ("SELECT * FROM t1 WHERE c2 = 3.5e2 AND c3 = 0x1F", "select * from t1 where c2 = ? and c3 = ?"),
        ("SELECT * FROM t WHERE x IS NULL AND y = TRUE", "select * from t where x is ? and y = ?"),
        ("SELECT /* hi */ a FROM t -- bye", "select a from t"),
        ("SELECT a FROM t # bye", "select a from t"),
        ("/*!40101 SET NAMES utf8 */", "set names utf8"),
        ("SELECT * FROM `Orders2024` WHERE `col1` = 5", "select * from `orders2024` where `col1` = ?"),
        ("SELECT * FROM t LIMIT 10, 20", "select * from t limit ?"),
        ("SELECT 1\x00", "select ?"),
        ("", ""),
    ],
)
def test_fingerprints_fold_literals_lists_whitespace_and_comments(sql: str, expected: str) -> None:
    assert fingerprint(sql) == expected
    assert classify(sql).fingerprint == expected


def test_statements_differing_only_in_values_share_a_fingerprint() -> None:
    a = fingerprint(
        "INSERT INTO t1 VALUES (1804289383,'mxvtvmC9127qJNm06sGB8R92q2j7vTiiITRDGXM9ZLzkdekbWtmXKwZ2qG1l')"
    )
    b = fingerprint("insert into t1 values (846930886, 'x'), (7, 'y')")
    assert a == b == "insert into t1 values(?+)"


# --- caching and the fast path ------------------------------------------------------


def _no_parser(sql: str) -> None:
    raise AssertionError(f"sqlglot was asked to parse {sql!r}")


@pytest.mark.parametrize(
    "sql",
    [
        "SET NAMES utf8mb4",
        "SET autocommit = 0",
        "SET GLOBAL general_log = 'OFF'",
        "SHOW FULL PROCESSLIST",
        "BEGIN",
        "COMMIT",
        "USE shop",
        "SELECT 1",
        "SELECT @@version_comment LIMIT 1",
        "INSERT INTO t1 VALUES (1804289383,'mxvtvmC9127qJNm06sGB8R92q2j7vTiiITRDGXM9ZLzkdekbWtm')",
        "INSERT INTO t1 VALUES (NULL,1804289383,'mxvtvmC9127qJNm06sGB8R92q2j7vTiiITRDGXM9ZLzkdekbWtm')",
        "INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y')",
        "REPLACE INTO t VALUES (1)",
        "TRUNCATE t",
        "DROP TABLE t",
        "ALTER TABLE t DROP COLUMN c",
        "GRANT SELECT ON shop.* TO 'u'@'%'",
    ],
)
def test_the_fast_path_never_calls_sqlglot(monkeypatch, sql: str) -> None:
    monkeypatch.setattr(statements_module, "_parse", _no_parser)
    classify(sql, "shop")


def test_statements_differing_only_in_literals_are_parsed_once(monkeypatch) -> None:
    calls = []
    real_parse = statements_module._parse

    def counting_parse(sql: str):
        calls.append(sql)
        return real_parse(sql)

    monkeypatch.setattr(statements_module, "_parse", counting_parse)
    for i in range(200):
        classify(f"SELECT intcol1,intcol2,charcol1 FROM t1 WHERE id = '{i}'\x00", "mysqlslap")
        classify(f"DELETE FROM orders WHERE id IN ({','.join(str(n) for n in range(i + 1))})", "shop")
        classify(f"SELECT * FROM orders WHERE id = {i}", f"db{i % 3}")
    assert len(calls) == 3


def test_a_verbatim_repeat_skips_all_string_work(monkeypatch) -> None:
    first = classify("SELECT 1\x00", None)
    monkeypatch.setattr(classify_module, "without_strings", _no_parser)
    assert classify("SELECT 1\x00", None) is first


def test_the_cache_is_bounded_in_entries(monkeypatch) -> None:
    monkeypatch.setattr(classify_module, "_CACHE_SIZE", 10)
    for i in range(50):
        classify(f"SELECT * FROM t{i}", "db")
    assert len(classify_module._RESULTS) <= 10
    assert len(classify_module._ANALYSES) <= 10
    assert len(classify_module._EXACT) <= 10
    assert classify("SELECT * FROM t1", "db").tables == ("db.t1",)


def test_the_cache_is_bounded_in_characters(monkeypatch) -> None:
    monkeypatch.setattr(classify_module, "_CACHE_CHARS", 10_000)
    for i in range(50):
        classify(f"SELECT {', '.join(f'c{n}' for n in range(300))} FROM t{i}", "db")
    assert 0 < classify_module._RESULTS.chars <= 10_000
    assert sum(len(key) for key, _ in classify_module._RESULTS) == classify_module._RESULTS.chars


# --- use_database ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("USE shop", "shop"),
        ("use shop;", "shop"),
        ("USE `shop`;\x00", "shop"),
        ("USE `my db`", "my db"),
        ("USE `a``b`", "a`b"),
        ("  USE\nbilling  ", "billing"),
        ("/* app=web */ USE shop", "shop"),
        ("USE shop\x00", "shop"),
        ("SELECT 1", None),
        ("USER()", None),
        ("user_defined_thing", None),
        ("USE", None),
        ("", None),
    ],
)
def test_use_database_returns_the_database_switched_to(sql: str, expected: str | None) -> None:
    assert use_database(sql) == expected


MORE_KEYS = [
    "SELECT `shop_order`.`id` FROM `shop_order` WHERE `shop_order`.`customer_id` = 42 LIMIT 21",
    "UPDATE `t2` SET `c1` = 'x`y`z', `c2` = 7 WHERE `id` IN (1, 2, 3)",
    "SELECT `2024`, `a1`, `b_2` FROM `x` WHERE `y` = '1' AND `z` = 0x1F",
    "SELECT * FROM `my table` WHERE `col 1` = 1",
    "SELECT * FROM t WHERE a = 'it''s' AND b = \"q\" AND c = 'x\\'y'",
    "INSERT INTO t1 VALUES (NULL,1804289383,'abc'),(NULL,2,'d')",
    "INSERT INTO `t1` (`a`, `b`) VALUES (1, NULL)",
    "SELECT a FROM t WHERE b = 'x' /* c */ -- d",
    "SELECT a FROM t WHERE b = -1.5e3 AND c = .5 AND d = 1.",
    "SELECT a\n  FROM t\tWHERE b =  'x'",
]


@pytest.mark.parametrize("sql", [case[0] for case in CASES] + MORE_KEYS)
def test_the_quick_lexer_passes_agree_with_the_full_lexer(sql: str) -> None:
    from ingest.sql import lexer

    text = lexer.clean(sql)
    assert lexer.fingerprint_of_key(lexer.normalize_key(text)) == lexer.fingerprint_of_key(
        lexer.full_lexer_key(text)
    )


def test_numbers_become_placeholders_and_names_keep_their_digits() -> None:
    from ingest.sql import lexer

    sql = "SELECT t12, 3.5, .5, a.5, 1.e5, x.5, 2fa, 0x1F, 0b101, 0b123, 5x1F FROM t1 WHERE a=-7"
    expected = "SELECT t12, ?, ?, a.5, ?, x.5, 2fa, ?, ?, 0b123, ? FROM t1 WHERE a=-?"
    assert lexer.finish_key(sql) == expected
    assert lexer.full_lexer_key(sql) == expected


def test_a_remembered_key_serves_only_texts_whose_digits_are_all_in_numbers() -> None:
    """finished_key remembers a key by the text's digit classes (0-1, 2-9): one lexing for every
    statement of a shape with other numbers, never for names or literals the digits change."""
    from ingest.sql import lexer

    texts = [
        "SELECT * FROM t WHERE k = 24466",
        "SELECT * FROM t WHERE k = 98213",  # the same classes: the key remembered
        "SELECT * FROM t WHERE k = 10110",  # other classes: lexed again
        "SELECT * FROM t1 WHERE k = 5",
        "SELECT * FROM t2 WHERE k = 7",  # a name's digit: never shared
        "SELECT 0b101",
        "SELECT 0b123",  # no bit literal: 0b1 and 0b2 differ in class
        "SELECT 0b111",
        "INSERT INTO t (k, n) VALUES (123, ?)",
        "INSERT INTO t (k, n) VALUES (456, ?)",
        "INSERT INTO t2 (k, n) VALUES (1, ?)",
        "INSERT INTO t3 (k, n) VALUES (1, ?)",
        "SELECT \ud800 = 5",
        "",
    ]
    clear_cache()
    for round_ in range(2):
        for text in texts:
            assert lexer.finished_key(text) == lexer.finish_key(text), (round_, text)
    assert classify("SELECT * FROM t1 WHERE k = 5", "db").tables == ("db.t1",)
    assert classify("SELECT * FROM t2 WHERE k = 7", "db").tables == ("db.t2",)
    assert classify("SELECT a FROM t WHERE k = 24466", "db").fingerprint == "select a from t where k = ?"
    assert classify("SELECT a FROM t WHERE k = 98213", "db").fingerprint == "select a from t where k = ?"


def test_remembered_keys_are_bounded(monkeypatch) -> None:
    from ingest.sql import lexer

    monkeypatch.setattr(lexer, "_FINISHED_MAX", 10)
    clear_cache()
    for i in range(50):
        lexer.finished_key(f"SELECT {'1' * i}")
    assert len(lexer._FINISHED) <= 10
    assert lexer.finished_key("SELECT " + "9" * 2000) == "SELECT ?"  # too long to remember
    assert len(lexer._FINISHED) <= 10
