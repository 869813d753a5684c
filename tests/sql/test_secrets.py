"""The secret masker on hostile SQL: every way of writing a secret-bearing clause MariaDB or MySQL
reads (and some they refuse, which the logs keep as well) loses its value to `*****`, the rest of
the statement is kept, and the classifier says of the masked statement what it said of the original.
Real logs of these statements: tests/test_secrets.py."""

from __future__ import annotations

import pytest

from ingest.sql import classify
from ingest.sql.secrets import MASK, RAW_CUT_MARK, mask_secrets, masked_raw

CASES = [
    # (statement, what it must become)
    ("CREATE USER 'u'@'%' IDENTIFIED BY 'pw1'", "CREATE USER 'u'@'%' IDENTIFIED BY *****"),
    (
        "create user u identified by 'p\\'w''x' password expire",
        "create user u identified by ***** password expire",
    ),
    (
        "ALTER USER u IDENTIFIED WITH caching_sha2_password BY 'pw2'",
        "ALTER USER u IDENTIFIED WITH caching_sha2_password BY *****",
    ),
    ("ALTER USER u IDENTIFIED WITH 'ed25519' AS 'hash3'", "ALTER USER u IDENTIFIED WITH 'ed25519' AS *****"),
    (
        "CREATE USER u IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('pw4')",
        "CREATE USER u IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD(*****)",
    ),
    ("SET PASSWORD FOR 'u'@'h' = PASSWORD('pw5')", "SET PASSWORD FOR 'u'@'h' = PASSWORD(*****)"),
    ("SET PASSWORD = 'pw6'", "SET PASSWORD = *****"),
    ("SET PASSWORD FOR u@h = 'pw7' REPLACE 'old7'", "SET PASSWORD FOR u@h = ***** REPLACE *****"),
    (
        "ALTER USER u IDENTIFIED BY 'new' REPLACE 'cur' RETAIN CURRENT PASSWORD",
        "ALTER USER u IDENTIFIED BY ***** REPLACE ***** RETAIN CURRENT PASSWORD",
    ),
    ("SELECT PASSWORD('pw8'), OLD_PASSWORD(\"pw9\")", "SELECT PASSWORD(*****), OLD_PASSWORD(*****)"),
    (
        "GRANT ALL ON *.* TO u IDENTIFIED BY PASSWORD '*ABCDEF'",
        "GRANT ALL ON *.* TO u IDENTIFIED BY PASSWORD *****",
    ),
    (
        "CHANGE MASTER TO MASTER_HOST='h', MASTER_PASSWORD='pw10', MASTER_PORT=3306",
        "CHANGE MASTER TO MASTER_HOST='h', MASTER_PASSWORD=*****, MASTER_PORT=3306",
    ),
    (
        "CHANGE REPLICATION SOURCE TO SOURCE_PASSWORD = 'pw11'",
        "CHANGE REPLICATION SOURCE TO SOURCE_PASSWORD = *****",
    ),
    (
        "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (HOST 'h', PASSWORD 'pw12', USER 'u')",
        "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (HOST 'h', PASSWORD *****, USER 'u')",
    ),
    ("START SLAVE USER='r' PASSWORD='pw13'", "START SLAVE USER='r' PASSWORD=*****"),
    (
        "SELECT AES_ENCRYPT('data', 'key14'), AES_DECRYPT(c, CONCAT('k', 15))",
        "SELECT AES_ENCRYPT('data', *****), AES_DECRYPT(c, CONCAT(*****, *****))",
    ),
    ("SELECT AES_ENCRYPT(PASSWORD('inner16'), 'key17')", "SELECT AES_ENCRYPT(PASSWORD(*****), *****)"),
    (
        "PREPARE s FROM 'CREATE USER x IDENTIFIED BY \\'pw18\\''",
        "PREPARE s FROM 'CREATE USER x IDENTIFIED BY *****'",
    ),
    ("SET @q = \"ALTER USER x IDENTIFIED BY 'pw19'\"", 'SET @q = "ALTER USER x IDENTIFIED BY *****"'),
    (
        "SET @s = X'" + b"IDENTIFIED BY 'pw20'".hex() + "'",
        "SET @s = X'" + b"IDENTIFIED BY *****".hex().upper() + "'",
    ),
    ("CREATE USER u IDENTIFIED/**/BY/*x*/_utf8mb4'pw21'", "CREATE USER u IDENTIFIED/**/BY/*x*/*****"),
    ("CREATE USER u IDENTIFIED BY _latin1 'pw22'", "CREATE USER u IDENTIFIED BY _latin1 *****"),
    ("/*!50000 CREATE USER u IDENTIFIED BY */ N'pw23'", "/*!50000 CREATE USER u IDENTIFIED BY */ *****"),
    ("CREATE USER u IDENTIFIED -- c\n BY # d\n 'pw24'", "CREATE USER u IDENTIFIED -- c\n BY # d\n *****"),
    ("ALTER USER u IDENTIFIED BY RANDOM PASSWORD", "ALTER USER u IDENTIFIED BY RANDOM PASSWORD"),
    ("CREATE USER u IDENTIFIED BY random", "CREATE USER u IDENTIFIED BY *****"),
    (
        "ALTER USER u PASSWORD EXPIRE NEVER; CREATE USER v IDENTIFIED BY 0x707732",
        "ALTER USER u PASSWORD EXPIRE NEVER; CREATE USER v IDENTIFIED BY *****",
    ),
    ("CREATE USER v IDENTIFIED BY b'0111'", "CREATE USER v IDENTIFIED BY *****"),
    ("CREATE USER u IDENTIFIED BY pw26", "CREATE USER u IDENTIFIED BY *****"),
    ("SELECT 1 /* IDENTIFIED BY 'pw27' */", "SELECT 1 /* IDENTIFIED BY ***** */"),
    ("CREATE USER u IDENTIFIED BY 'cut off pw28", "CREATE USER u IDENTIFIED BY *****"),
    (
        "UPDATE mysql.user SET authentication_string = PASSWORD('pw29') WHERE user='bob'",
        "UPDATE mysql.user SET authentication_string = PASSWORD(*****) WHERE user='bob'",
    ),
    (
        "UPDATE app.users SET password = 'pw30' WHERE id = 1",
        "UPDATE app.users SET password = ***** WHERE id = 1",
    ),
    (
        "CREATE USER a IDENTIFIED BY 'x1', b IDENTIFIED BY 'x2'",
        "CREATE USER a IDENTIFIED BY *****, b IDENTIFIED BY *****",
    ),
    # server_audit's own mask, cut short by a quote escaped inside the password
    ("ALTER USER 'a'@'%' IDENTIFIED BY *****'26\\\\'", "ALTER USER 'a'@'%' IDENTIFIED BY *****"),
    # nothing to mask
    (
        "SELECT password, password_expired FROM mysql.user",
        "SELECT password, password_expired FROM mysql.user",
    ),
    ("CREATE USER u IDENTIFIED BY *****", "CREATE USER u IDENTIFIED BY *****"),
    ("DELETE FROM orders WHERE note = 'alex'", "DELETE FROM orders WHERE note = 'alex'"),
]


@pytest.mark.parametrize(("sql", "masked"), CASES)
def test_it_masks_the_value_of_every_secret_bearing_clause(sql: str, masked: str) -> None:
    assert mask_secrets(sql) == masked


@pytest.mark.parametrize(("sql", "masked"), CASES)
def test_the_masked_statement_is_classified_as_the_original(sql: str, masked: str) -> None:
    a, b = classify(sql, "db"), classify(mask_secrets(sql), "db")
    assert (a.statement_type, a.tables, a.destructive, a.flags) == (
        b.statement_type,
        b.tables,
        b.destructive,
        b.flags,
    )


def test_a_statement_without_secrets_is_returned_as_it_is() -> None:
    sql = "DELETE FROM shop.orders WHERE id = 0x1F AND code = X'41'"
    assert mask_secrets(sql) is sql


def test_literals_inside_literals_are_followed_only_so_deep() -> None:
    inner = "CREATE USER x IDENTIFIED BY 'pw'"
    for _ in range(2):
        inner = "PREPARE s FROM '" + inner.replace("\\", "\\\\").replace("'", "\\'") + "'"
    assert "pw'" not in mask_secrets(inner).replace("\\'", "'").replace("''", "'")


def test_raw_bytes_are_cut_where_a_secret_may_begin() -> None:
    raw = b'"2026-11-24 20:32:29","u",1,1,"Query","CREATE USER \'a\' IDENTIFIED BY \'x\\"y\'"\n'
    cut = masked_raw(raw)
    assert cut.startswith(b'"2026-11-24 20:32:29","u",1,1,"Query","CREATE USER \'a\' IDENTIFIED ')
    assert b"x\\" not in cut and MASK.encode() in cut
    assert masked_raw(b"SET @s = 0x4944") == b"SET @s =  " + RAW_CUT_MARK  # a hex literal may hide one
    assert masked_raw(b"nothing shows where") == RAW_CUT_MARK
