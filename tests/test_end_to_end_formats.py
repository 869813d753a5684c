"""The same question, "who deleted rows from shop.orders?", asked of the same story told by each
audit log format: the answer (account, host, connection, time, statement, outcome) is the same.

The logs are built here in each format's documented layout (no server here writes them: MySQL
Enterprise and Percona plugins do not run on MariaDB); the corpus tests check the layouts
against third-party samples.
"""

from __future__ import annotations

import gzip
import io
import json

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)

# bob connects from 10.0.0.8, deletes twice from shop.orders (the second one refused: 1142);
# mallory's login is refused.
STORY = [
    ("connect", 7, "2026-01-05T09:00:00", "bob", "db1", "10.0.0.8", None, 0),
    ("query", 7, "2026-01-05T09:00:01", "bob", "db1", "10.0.0.8", "DELETE FROM shop.orders WHERE id = 3", 0),
    ("query", 7, "2026-01-05T09:00:02", "bob", "db1", "10.0.0.8", "DELETE FROM orders", 1142),
    ("connect", 8, "2026-01-05T09:00:03", "mallory", "evil", "10.6.6.6", None, 1045),
    ("quit", 7, "2026-01-05T09:00:04", "bob", "db1", "10.0.0.8", None, 0),
]


def enterprise_json() -> bytes:
    objects = []
    for kind, conn, when, user, host, ip, sql, status in STORY:
        o = {
            "timestamp": when.replace("T", " "),
            "id": len(objects),
            "connection_id": conn,
            "account": {"user": user, "host": host},
            "login": {"user": user, "os": "", "ip": ip, "proxy": ""},
        }
        if kind == "query":
            o |= {
                "class": "general",
                "event": "status",
                "general_data": {"command": "Query", "sql_command": "delete", "query": sql, "status": status},
            }
        else:
            o |= {
                "class": "connection",
                "event": "connect" if kind == "connect" else "disconnect",
                "connection_data": {"connection_type": "tcp/ip", "status": status, "db": "shop"},
            }
        objects.append(json.dumps(o, indent=2))
    return ("[\n" + ",\n".join(objects) + "\n]\n").encode()


def percona_xml() -> bytes:
    names = {"connect": "Connect", "query": "Query", "quit": "Quit"}
    records = []
    for kind, conn, when, user, host, ip, sql, status in STORY:
        who = f"{user}[{user}] @ {host} [{ip}]" if kind == "query" else user
        text = f' SQLTEXT="{sql}"' if sql else ""
        records.append(
            f'  <AUDIT_RECORD NAME="{names[kind]}" RECORD="{len(records)}_2026" TIMESTAMP="{when} UTC"'
            f' CONNECTION_ID="{conn}" STATUS="{status}" USER="{who}" HOST="{host}" IP="{ip}"'
            f' DB="shop"{text}/>\n'
        )
    return ('<?xml version="1.0" encoding="utf-8"?>\n<AUDIT>\n' + "".join(records) + "</AUDIT>\n").encode()


def percona_json() -> bytes:
    names = {"connect": "Connect", "query": "Query", "quit": "Quit"}
    lines = []
    for kind, conn, when, user, host, ip, sql, status in STORY:
        r = {
            "name": names[kind],
            "record": f"{len(lines)}_2026",
            "timestamp": f"{when} UTC",
            "connection_id": str(conn),
            "status": status,
            "user": f"{user}[{user}] @ {host} [{ip}]",
            "host": host,
            "ip": ip,
            "db": "shop",
            "os_user": "",
            "sqltext": sql or "",
        }
        lines.append(json.dumps({"audit_record": r}) + "\n")
    return "".join(lines).encode()


@pytest.mark.parametrize("make", [enterprise_json, percona_xml, percona_json], ids=lambda f: f.__name__)
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gz"])
def test_every_format_names_the_same_culprit(api_client, tmp_path, make, compressed) -> None:
    data = make()
    path = tmp_path / ("audit.log.gz" if compressed else "audit.log")
    path.write_bytes(gzip.compress(data) if compressed else data)
    out = io.StringIO()
    call_command("ingest", str(path), "--server", "shop-db", stdout=out)  # --format auto
    assert ", 0 problems," in out.getvalue()

    rows = api_client.get("/api/v1/events/", {"table": "shop.orders", "destructive": "true"}).json()[
        "results"
    ]
    assert [
        (r["user"], r["host"], r["ip"], r["connection_id"], r["occurred_at"], r["sql"], r["status"])
        for r in rows
    ] == [
        ("bob", "db1", "10.0.0.8", 7, "2026-01-05T09:00:02.000000Z", "DELETE FROM orders", "1142"),
        (
            "bob",
            "db1",
            "10.0.0.8",
            7,
            "2026-01-05T09:00:01.000000Z",
            "DELETE FROM shop.orders WHERE id = 3",
            "ok",
        ),
    ]
    assert "failed" in rows[0]["flags"] and "failed" not in rows[1]["flags"]
    assert rows[0]["tables"] == ["shop.orders"]  # the current database from the log qualifies it
    refused = api_client.get("/api/v1/events/", {"user": "mallory"}).json()["results"]
    assert [(r["command"], r["status"], "failed" in r["flags"]) for r in refused] == [
        ("Connect", "denied", True)
    ]
    # Again: nothing new.
    out = io.StringIO()
    call_command("ingest", str(path), "--server", "shop-db", stdout=out)
    assert "0 events stored (5 already there)" in out.getvalue()


def test_an_unknown_format_stops_with_what_was_tried_and_the_first_line(tmp_path) -> None:
    from django.core.management.base import CommandError

    path = tmp_path / "notes.txt"
    path.write_bytes(b"Dear diary, today the database was fine.\nNothing else.\n")
    with pytest.raises(CommandError) as caught:
        call_command("ingest", str(path), stdout=io.StringIO())
    message = str(caught.value)
    for name in ("json-audit", "xml-audit", "mariadb-audit", "general-log"):
        assert name in message
    assert "Dear diary, today the database was fine." in message


def test_the_client_program_and_os_user_of_a_session_are_kept(api_client, tmp_path) -> None:
    connect = {
        "timestamp": "2026-01-05 09:00:00", "id": 1, "class": "connection", "event": "connect",
        "connection_id": 7, "account": {"user": "bob", "host": "db1"},
        "login": {"user": "bob", "os": "", "ip": "10.0.0.8", "proxy": ""},
        "connection_data": {"connection_type": "tcp/ip", "status": 0, "db": "shop",
                            "connection_attributes": {"program_name": "mysqldump", "os_user": "bobby"}},
    }  # fmt: skip
    delete = {
        "timestamp": "2026-01-05 09:00:01", "id": 2, "class": "general", "event": "status",
        "connection_id": 7, "account": {"user": "bob", "host": "db1"},
        "general_data": {"command": "Query", "query": "DELETE FROM orders", "status": 0},
    }  # fmt: skip
    path = tmp_path / "audit.log"
    path.write_text(json.dumps(connect) + ",\n" + json.dumps(delete) + ",\n")
    call_command("ingest", str(path), "--server", "s", stdout=io.StringIO())
    [row] = api_client.get("/api/v1/events/", {"destructive": "true"}).json()["results"]
    assert row["client"] == {"program": "mysqldump", "os_user": "bobby"}
