"""The real MariaDB's server_audit plugin, switched on here, writes a log that AuditWeb reads:
known statements from known users come back as exactly those events, attributed.

Under the shared lock /tmp/auditweb-mariadb.lock: the plugin is loaded if it is not, logs
to a file of this test, then every server_audit_* setting is put back (and the plugin
unloaded if it was not loaded before). Skipped when MariaDB is not here.
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from django.core.management import call_command

pymysql = pytest.importorskip("pymysql")
from tests.mariadb import hold_lock, root_or_skip  # noqa: E402 - after the skip

pytestmark = [pytest.mark.mariadb, pytest.mark.django_db(transaction=True)]

SETTINGS = ("events", "output_type", "file_path", "incl_users", "excl_users", "logging")


def write_log(path: Path) -> dict[str, int]:
    """Switch the plugin on into `path`, run the story, switch it off again; the connection ids."""
    admin = root_or_skip()
    fd = hold_lock()
    c = admin.cursor()
    c.execute("SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'SERVER_AUDIT'")
    loaded = c.fetchone()[0] == 1
    saved: dict[str, str] = {}
    try:
        if not loaded:
            c.execute("INSTALL SONAME 'server_audit'")
        for name in SETTINGS:
            c.execute(f"SELECT @@global.server_audit_{name}")
            saved[name] = str(c.fetchone()[0])
        c.execute("DROP DATABASE IF EXISTS la_shop")
        c.execute("CREATE DATABASE la_shop")
        c.execute("CREATE TABLE la_shop.orders (id INT PRIMARY KEY)")
        c.execute("INSERT INTO la_shop.orders VALUES (1), (2), (3)")
        c.execute("DROP USER IF EXISTS 'la_bob'@'%'")
        c.execute("CREATE USER 'la_bob'@'%' IDENTIFIED BY 'la-Bob-7'")
        c.execute("GRANT SELECT, DELETE ON la_shop.* TO 'la_bob'@'%'")
        c.execute("SET GLOBAL server_audit_logging = OFF")
        c.execute("SET GLOBAL server_audit_output_type = 'file'")
        c.execute("SET GLOBAL server_audit_events = 'CONNECT,QUERY'")
        c.execute("SET GLOBAL server_audit_excl_users = ''")
        c.execute("SET GLOBAL server_audit_incl_users = 'la_bob,la_nobody'")
        c.execute("SET GLOBAL server_audit_file_path = %s", (str(path),))
        c.execute("SET GLOBAL server_audit_logging = ON")
        bob = pymysql.connect(host="127.0.0.1", user="la_bob", password="la-Bob-7", database="la_shop")
        with bob.cursor() as b:
            b.execute("SELECT CONNECTION_ID()")
            bob_id = int(b.fetchone()[0])
            b.execute("DELETE FROM orders WHERE id = 3")
            with pytest.raises(pymysql.err.ProgrammingError):
                b.execute("DELETE FROM no_such_table")
            bob.commit()
        bob.close()
        with pytest.raises(pymysql.err.OperationalError):
            pymysql.connect(host="127.0.0.1", user="la_nobody", password="wrong")
        time.sleep(0.2)
        c.execute("SET GLOBAL server_audit_logging = OFF")
        return {"bob": bob_id}
    finally:
        c.execute("SET GLOBAL server_audit_logging = OFF")
        for name, value in saved.items():
            if name != "logging":
                c.execute(f"SET GLOBAL server_audit_{name} = %s", (value,))
        if saved.get("logging") in ("1", "ON"):
            c.execute("SET GLOBAL server_audit_logging = ON")
        if not loaded:
            c.execute("UNINSTALL SONAME 'server_audit'")
        c.execute("DROP DATABASE IF EXISTS la_shop")
        c.execute("DROP USER IF EXISTS 'la_bob'@'%'")
        admin.close()
        os.close(fd)


def test_what_the_plugin_wrote_is_read_back_exactly(tmp_path, api_client) -> None:
    log = Path("/tmp") / f"auditweb-live-audit-{os.getpid()}.log"  # the server writes it as its own user
    log.unlink(missing_ok=True)
    try:
        ids = write_log(log)
        out = io.StringIO()
        call_command("ingest", str(log), "--server", "live-audit", stdout=out)  # --format auto
    finally:
        log.unlink(missing_ok=True)
    assert ", 0 problems," in out.getvalue()

    rows = api_client.get("/api/v1/events/", {"user": "la_bob", "statement_type": "DELETE"}).json()["results"]
    assert [
        (r["connection_id"], r["host"], r["database"], r["sql"], r["status"], r["destructive"]) for r in rows
    ] == [
        (ids["bob"], "127.0.0.1", "la_shop", "DELETE FROM no_such_table", "1146", True),
        (ids["bob"], "127.0.0.1", "la_shop", "DELETE FROM orders WHERE id = 3", "ok", True),
    ]
    assert "failed" in rows[0]["flags"] and rows[1]["tables"] == ["la_shop.orders"]
    refused = api_client.get("/api/v1/events/", {"user": "la_nobody"}).json()["results"]
    # Newest first: the plugin logs a DISCONNECT after the FAILED_CONNECT.
    assert [(r["command"], r["status"], "failed" in r["flags"]) for r in refused] == [
        ("Quit", "ok", False),
        ("Connect", "denied", True),
    ]
