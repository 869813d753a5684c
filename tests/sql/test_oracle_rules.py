"""Oracle's rules (ingest/dialects/oracle.py): every documented action that removes or overwrites
data is destructive, one test each; what is not; what weakens auditing; hostile text."""

from __future__ import annotations

import pytest

from ingest.dialects.oracle import DESTRUCTIVE_ACTIONS, audit_change, classify, tables_named

# Each destructive action with a statement Oracle audits under it.
DESTRUCTIVE = {
    "DELETE": "DELETE FROM shop.orders WHERE id = 1",
    "UPDATE": "UPDATE shop.orders SET total = 0",
    "MERGE": "MERGE INTO shop.orders o USING s ON (o.id = s.id) WHEN MATCHED THEN UPDATE SET o.total = 0",
    "UPSERT": "MERGE INTO shop.orders o USING s ON (o.id = s.id) WHEN NOT MATCHED THEN INSERT VALUES (1)",
    "TRUNCATE TABLE": "TRUNCATE TABLE shop.orders",
    "TRUNCATE CLUSTER": "TRUNCATE CLUSTER shop.order_cluster",
    "DROP TABLE": "DROP TABLE shop.orders PURGE",
    "DROP USER": "DROP USER shop CASCADE",
    "DROP TABLESPACE": "DROP TABLESPACE shop_data INCLUDING CONTENTS AND DATAFILES",
    "DROP CLUSTER": "DROP CLUSTER shop.order_cluster INCLUDING TABLES",
    "DROP MATERIALIZED VIEW": "DROP MATERIALIZED VIEW shop.order_totals",
    "DROP PLUGGABLE DATABASE": "DROP PLUGGABLE DATABASE shoppdb INCLUDING DATAFILES",
    "DROP DATABASE": "DROP DATABASE",
    "PURGE TABLE": "PURGE TABLE shop.orders",
    "PURGE TABLESPACE": "PURGE TABLESPACE shop_data",
    "PURGE TABLESPACE SET": "PURGE TABLESPACE SET shop_ts",
    "PURGE DBA_RECYCLEBIN": "PURGE DBA_RECYCLEBIN",
    "PURGE USER_RECYCLEBIN": "PURGE USER_RECYCLEBIN",
    "PURGE RECYCLEBIN": "PURGE RECYCLEBIN",
    "FLASHBACK TABLE": "FLASHBACK TABLE shop.orders TO SCN 5000100",
    "FLASHBACK DATABASE": "FLASHBACK DATABASE TO RESTORE POINT before_upgrade",
}


def test_every_destructive_action_has_its_test() -> None:
    assert set(DESTRUCTIVE) == DESTRUCTIVE_ACTIONS


@pytest.mark.parametrize("action", sorted(DESTRUCTIVE))
def test_it_classifies_the_action_destructive(action: str) -> None:
    verdict = classify(action, DESTRUCTIVE[action])
    assert verdict.destructive and verdict.statement_type == action
    # a record that names no action (a SYS audit record) is read from its text alike
    assert classify(None, DESTRUCTIVE[action]).destructive or action in ("UPSERT",)


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE shop.orders DROP COLUMN notes",
        "ALTER TABLE shop.orders DROP (notes, extra)",
        "ALTER TABLE shop.orders DROP PARTITION p2024",
        "ALTER TABLE shop.orders DROP SUBPARTITION p2024_a",
        "ALTER TABLE shop.orders DROP UNUSED COLUMNS",
        "ALTER TABLE shop.orders SET UNUSED (notes)",
        "ALTER TABLE shop.orders TRUNCATE PARTITION p2024",
        "ALTER TABLE shop.orders EXCHANGE PARTITION p2024 WITH TABLE shop.empty",
    ],
)
def test_alter_table_that_loses_data_is_destructive(sql: str) -> None:
    assert classify("ALTER TABLE", sql).destructive


@pytest.mark.parametrize(
    ("action", "sql"),
    [
        ("ALTER TABLE", "ALTER TABLE shop.orders DROP CONSTRAINT orders_fk"),
        ("ALTER TABLE", "ALTER TABLE shop.orders ADD (note VARCHAR2(20) DEFAULT 'drop column x')"),
        ("ALTER TABLE", "ALTER TABLE shop.orders /* drop column notes */ ADD x NUMBER"),
        ("SELECT", "SELECT * FROM shop.orders AS OF SCN 5000100"),
        ("INSERT", "INSERT INTO shop.orders VALUES (1)"),
        ("DROP VIEW", "DROP VIEW shop.v_orders"),
        ("DROP INDEX", "DROP INDEX shop.orders_ix"),
        ("UNDROP OBJECT", "FLASHBACK TABLE shop.orders TO BEFORE DROP"),
        ("FLASHBACK", "SELECT * FROM shop.orders AS OF TIMESTAMP SYSDATE - 1"),
        ("LOGON", ""),
        ("COMMIT", "COMMIT"),
    ],
)
def test_what_keeps_the_data_is_not_destructive(action: str, sql: str) -> None:
    assert not classify(action, sql).destructive


@pytest.mark.parametrize(
    ("action", "sql"),
    [
        ("NOAUDIT", "NOAUDIT POLICY shop_dml_pol"),
        ("DROP AUDIT POLICY", "DROP AUDIT POLICY shop_dml_pol"),
        ("ALTER AUDIT POLICY", "ALTER AUDIT POLICY shop_dml_pol DROP ACTIONS DELETE ON shop.orders"),
        ("SYSTEM NOAUDIT", "NOAUDIT DELETE ANY TABLE"),
        ("NOAUDIT OBJECT", "NOAUDIT DELETE ON shop.orders"),
        ("EXECUTE", "BEGIN DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL(audit_trail_type => 1); END;"),
        ("EXECUTE", "begin sys.dbms_audit_mgmt . create_purge_job('p', 1, 24); end;"),
        ("EXECUTE", "BEGIN DBMS_AUDIT_MGMT.SET_LAST_ARCHIVE_TIMESTAMP(1, SYSTIMESTAMP); END;"),
        ("ALTER SYSTEM", "ALTER SYSTEM SET audit_trail = NONE SCOPE = SPFILE"),
        ("DELETE", "DELETE FROM sys.aud$"),
        ("TRUNCATE TABLE", "TRUNCATE TABLE AUD$"),
        ("DELETE", "DELETE FROM audsys.aud$unified"),
    ],
)
def test_it_flags_what_weakens_auditing(action: str, sql: str) -> None:
    assert "anti_forensic" in classify(action, sql).flags


@pytest.mark.parametrize(
    ("action", "sql"),
    [
        ("AUDIT", "AUDIT POLICY shop_dml_pol"),
        ("ALTER AUDIT POLICY", "ALTER AUDIT POLICY shop_dml_pol ADD ACTIONS DELETE ON shop.orders"),
        ("SELECT", "SELECT 'DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL' FROM dual"),
        ("EXECUTE", "BEGIN NULL; -- DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL\nEND;"),
        ("ALTER SYSTEM", "ALTER SYSTEM SET open_cursors = 500"),
        ("DELETE", "DELETE FROM shop.audit_copy"),
    ],
)
def test_what_only_looks_like_it_is_not_flagged(action: str, sql: str) -> None:
    assert "anti_forensic" not in classify(action, sql).flags


def test_audit_changes_name_their_policy_as_oracle_stores_it() -> None:
    assert audit_change("NOAUDIT", "NOAUDIT POLICY shop_dml_pol") == ("off", "SHOP_DML_POL")
    assert audit_change("DROP AUDIT POLICY", 'DROP AUDIT POLICY "Mixed Pol"') == ("off", "Mixed Pol")
    assert audit_change("AUDIT", "AUDIT POLICY Shop_DML_Pol BY scott") == ("on", "SHOP_DML_POL")
    assert audit_change("SYSTEM NOAUDIT", "NOAUDIT DELETE ANY TABLE") == ("off", "")
    assert audit_change("EXECUTE", "BEGIN DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL(1); END;") == (
        "purge",
        "DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL",
    )
    assert audit_change("DELETE", "DELETE FROM t") is None


@pytest.mark.parametrize(
    "sql", ["'" * 100_001, "/*" * 50_000, "ALTER TABLE t " + "DROP " * 50_000, "\x00\ud800" * 1000]
)
def test_hostile_text_never_raises(sql: str) -> None:
    verdict = classify("ALTER TABLE", sql)
    assert verdict.statement_type == "ALTER TABLE"


def test_the_text_names_tables_as_oracle_stores_them() -> None:
    merge = "MERGE INTO shop.orders o USING shop.staging s ON (o.id = s.id) WHEN MATCHED THEN DELETE"
    assert tables_named(merge) == ("SHOP.ORDERS", "SHOP.STAGING")
    assert tables_named('DROP TABLE "Shop"."Audit Copy" PURGE') == ("Shop.Audit Copy",)
    assert tables_named("DELETE FROM orders WHERE id IN (SELECT id FROM shop.old)") == ("ORDERS", "SHOP.OLD")
    assert tables_named("BEGIN DBMS_AUDIT_MGMT.CLEAN_AUDIT_TRAIL(1); END;") == ()
    assert tables_named("DELETE FROM (" * 5000) == ()
