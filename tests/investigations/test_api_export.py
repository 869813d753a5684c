"""The NDJSON export: every event of a filter, one JSON object a line, plain or in ECS names."""

from __future__ import annotations

import json

import pytest

from ingest.models import Event

from ..conftest import FIXTURES

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"
SLAP = FIXTURES / "genlog" / "mariadb-10.11.19-slap.log"

pytestmark = pytest.mark.django_db(transaction=True)


def export(api_client, **params: str) -> list[dict]:
    response = api_client.get("/api/v1/events/export.ndjson", params)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/x-ndjson"
    body = b"".join(response.streaming_content)
    assert body == b"" or body.endswith(b"\n")
    return [json.loads(line) for line in body.splitlines()]


def test_it_exports_every_event_of_the_filter_oldest_first(api_client, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    rows = export(api_client)
    assert [r["id"] for r in rows] == list(
        Event.objects.order_by("occurred_at", "id").values_list("id", flat=True)
    )
    assert len(rows) > 50
    page = api_client.get("/api/v1/events/", {"table": "shop.orders", "destructive": "true"}).json()[
        "results"
    ]
    orders = export(api_client, table="shop.orders", destructive="true")
    assert orders == page[::-1]  # the same events with the same fields as the API, oldest first


def test_ecs_names_the_fields_as_elastic_expects(api_client, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    rows = export(api_client, table="shop.orders", destructive="true", schema="ecs")
    delete = next(r for r in rows if r["message"] == "DELETE FROM orders")
    assert delete["@timestamp"].endswith("Z")
    assert delete["event"]["action"] == "DELETE" and delete["event"]["type"] == ["change"]
    assert delete["event"]["category"] == ["database"]
    assert delete["user"] == {"name": "bob"}
    assert delete["client"]["ip"] == "127.0.0.1"
    assert delete["service"] == {"type": "mysql", "name": "shop-db"}
    assert delete["tags"] == ["no_where"]
    assert delete["auditweb"]["tables"] == ["shop.orders"] and delete["auditweb"]["connection_id"] == 5
    assert delete["log"]["file"]["path"].endswith("general.log")
    assert isinstance(delete["log"]["offset"], int)


def test_an_unknown_schema_or_filter_is_refused(api_client) -> None:
    assert api_client.get("/api/v1/events/export.ndjson", {"schema": "splunk"}).status_code == 400
    assert api_client.get("/api/v1/events/export.ndjson", {"since": "yesterday"}).status_code == 400


def test_the_export_needs_a_token(client) -> None:
    assert client.get("/api/v1/events/export.ndjson").status_code in (401, 403)


# -- the lines PostgreSQL builds are the API's events, field for field --------------------------

HOSTILE = (
    b"2026-01-05T09:00:00.000000Z\t    7 Connect\tm\xc3\xa9l \"o'\\\\@h\xc3\xb6st on shop using TCP/IP\n"
    b"2026-01-05T09:00:01.000000Z\t    7 Query\t"
    b"DELETE FROM orders WHERE note = 'a\"b\\\\c\\td\x01e\x02f\x1b[31m'\n"
    b"2026-01-05T09:00:02.000000Z\t    7 Query\tUPDATE orders SET note = '\xff\xfe not utf-8 \x00 nul'\n"
    b"2026-01-05T09:00:03.000000Z\t    7 Query\t"
    b"INSERT INTO orders VALUES ('\xf0\x9f\x92\xa3 \xe2\x80\xa8 line\n"
    b"second line\r\nthird')\n"
    b'2026-01-05T09:00:04.000000Z\t    8 Query\tDROP TABLE `we/ird`.`t"x`\n'
    b"2026-01-05T09:00:05.000000Z\t    8 Query\tSELECT '100%_done', '100 percent'\n"
)


def api_rows(api_client, params: dict) -> list[dict]:
    """Every event of the filter through /api/v1/events/ (all pages), oldest first (the API lists
    newest first, events without a time after the others)."""
    rows: list[dict] = []
    url, query = "/api/v1/events/", {**params, "page_size": 1000}
    while url:
        body = api_client.get(url, query).json()
        rows += body["results"]
        url, query = body["next"], {}
    timed = [r for r in rows if r["occurred_at"]]
    return timed[::-1] + [r for r in rows if not r["occurred_at"]][::-1]


def ecs_of(row: dict) -> dict:
    """What the ECS line says about an event, from its /api/v1/events/ fields: the mapping the
    README's table documents."""
    user, host, ip = row["user"], row["host"], row["ip"]
    client = {k: v for k, v in (("address", host), ("ip", ip)) if v}
    if user:
        client["user"] = {"name": user}
    auditweb = ("session", "connection_id", "database", "command", "statement_type", "tables", "destructive",
                "flags", "fingerprint", "rows_affected", "status", "source", "client", "attribution",
                "definer", "rows_changed")  # fmt: skip
    return {
        "@timestamp": row["occurred_at"],
        "ecs": {"version": "8.11.0"},
        "message": row["sql"],
        "event": {
            "kind": "event",
            "category": ["database"],
            "type": ["change"] if row["destructive"] else ["access"],
            "action": row["statement_type"] or row["command"],
            "outcome": {"ok": "success", None: "unknown"}.get(row["status"], "failure"),
            "id": str(row["id"]),
            "dataset": "auditweb.events",
        },
        "service": {"type": "mysql", "name": row["server"]},
        "user": {"name": user} if user else {},
        "client": client,
        "related": {"user": [user] if user else [], "ip": [ip] if ip else []},
        "log": {"file": {"path": row["source"]["file"]}, "offset": row["source"]["offset"]},
        "tags": sorted(row["flags"]),
        "auditweb": {key: row[key] for key in auditweb},
    }


@pytest.fixture
def scene(ingest_bytes):
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    ingest_bytes((FIXTURES / "crime_scene" / "mariadb-10.11.19-server_audit.log").read_bytes(),
                 name="server_audit.log", server="audit-db", fmt="mariadb-audit")  # fmt: skip
    ingest_bytes(HOSTILE, name="hostile.log", server="odd-db")
    # one whose time the log never gave (sorted last) and one of a session row that is not there
    ingest_bytes(b"/usr/sbin/mysqld, Version: 5.0.95-log. started with:\nTcp port: 3306\n"
                 b"Time                 Id Command    Argument\n\t\t      1 Query\tTRUNCATE t\n",
                 name="untimed.log", server="old-db", fmt="general-log")  # fmt: skip


FILTERS = [
    {},
    {"user": "bob"},
    {"host": "localhost"},
    {"server": "audit-db"},
    {"database": "shop"},
    {"table": "shop.orders"},
    {"table": "orders"},
    {"statement_type": ["DELETE", "DROP TABLE"]},
    {"destructive": "false"},
    {"flag": "no_where"},
    {"connection_id": "7"},
    {"since": "2026-01-05T09:00:01Z", "until": "2026-01-05T09:00:04Z"},
    {"q": "orders"},
    {"q": "100%_"},
    {"server": "shop-db", "destructive": "true", "user": "bob"},
]


@pytest.mark.parametrize("params", FILTERS, ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "all")
def test_each_filter_exports_exactly_the_apis_events_field_for_field(api_client, scene, params) -> None:
    expected = api_rows(api_client, params)
    assert expected  # each filter finds something in the scene
    assert export(api_client, **params) == expected
    assert export(api_client, **params, schema="ecs") == [ecs_of(row) for row in expected]


def test_every_event_of_the_scene_is_exported_with_odd_bytes_intact(api_client, scene) -> None:
    rows = export(api_client)
    assert len(rows) == Event.objects.count() > 100
    assert rows[-1]["occurred_at"] is None and rows[-1]["sql"] == "TRUNCATE t"  # time unknown: last
    odd = {r["sql"]: r for r in rows if r["server"] == "odd-db"}
    assert "DELETE FROM orders WHERE note = 'a\"b\\\\c\\td\x01e\x02f\x1b[31m'" in odd
    assert "UPDATE orders SET note = '\ufffd\ufffd not utf-8  nul'" in odd
    assert "INSERT INTO orders VALUES ('\U0001f4a3 \u2028 line\nsecond line\r\nthird')" in odd
    assert next(iter(odd.values()))["user"] == "m\u00e9l \"o'\\\\"


def test_a_client_that_goes_away_stops_the_export_and_leaves_the_connection_usable(
    api_client, ingest_bytes
) -> None:
    from django.db import connection

    from investigations.query.export import CHUNK_BYTES

    for n in range(6):  # about 4 chunks of lines
        ingest_bytes(SLAP.read_bytes(), name=f"slap{n}.log", server=f"slap-{n}")
    response = api_client.get("/api/v1/events/export.ndjson")
    pieces = iter(response.streaming_content)
    first = next(pieces)
    assert len(first) >= CHUNK_BYTES and first.endswith(b"\n")
    response.close()  # what the web server does when the client disconnects
    pg = connection.connection
    assert pg.info.transaction_status.name == "IDLE"  # the COPY was cancelled and drained
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
        cursor.execute("SHOW work_mem")
        assert cursor.fetchone()[0] == "4MB"  # the default again
        cursor.execute("SELECT count(*) FROM ingest_event")
        assert cursor.fetchone()[0] == Event.objects.count() > 0


# -- the README's ECS table is what the export does ----------------------------------------------


def readme_ecs_table() -> list[tuple[list[str], list[str], str]]:
    """(AuditWeb fields, ECS fields, how) of each row of the README's "ECS field names" table."""
    import re

    from ..conftest import REPO

    text = (REPO / "README.md").read_text()
    table = text.split("**4. ECS field names**", 1)[1].split("\n\n`tests/", 1)[0]
    rows = []
    for line in table.splitlines():
        if line.startswith("| `") or line.startswith("| (constant)"):
            ours, theirs, how = (cell.strip() for cell in line.strip().strip("|").split("|"))
            rows.append((re.findall(r"`([^`]+)`", ours), re.findall(r"`([^`]+)`", theirs), how))
    return rows


def at(row: dict, path: str) -> object:
    for key in [path] if path == "@timestamp" else path.split("."):
        row = row[key]
    return row


def leaves(value: object, prefix: str = "") -> set[str]:
    if isinstance(value, dict) and value:
        return {leaf for k, v in value.items() for leaf in leaves(v, f"{prefix}{k}." if k else prefix)}
    return {prefix.rstrip(".")}


def test_the_readmes_ecs_table_is_what_the_export_writes(api_client, scene) -> None:
    import json as jsonlib
    import re

    table = readme_ecs_table()
    assert len(table) >= 15
    plain_rows, ecs_rows = export(api_client), export(api_client, schema="ecs")
    documented: set[str] = set()
    for plain, ecs in zip(plain_rows, ecs_rows, strict=True):
        for ours, theirs, how in table:
            if ours == ["auditweb.<the same name>"] or theirs == ["auditweb.<the same name>"]:
                for name in ours:
                    assert at(ecs, f"auditweb.{name}") == at(plain, name)
                    documented.add(f"auditweb.{name}")
                continue
            if not ours:  # constants: as many values in `how` as fields
                values = [jsonlib.loads(v) if v.startswith("[") else v for v in re.findall(r"`([^`]+)`", how)]
                for path, value in zip(theirs, values, strict=True):
                    assert at(ecs, path) == value, path
                    documented.add(path)
                continue
            (name,), (path,) = ours, theirs
            value = at(plain, name)
            documented.add(path)
            if name in ("user", "host", "ip") and not value and how != "in a list":
                with pytest.raises(KeyError):  # left out rather than sent empty
                    at(ecs, path)
                continue
            got = at(ecs, path)
            if how == "same value":
                assert got == value, path
            elif how.startswith("same value (the `command`"):
                assert got == (value or plain["command"])
            elif how == "in a list":
                assert got == ([value] if value else [])
            elif how == "as text":
                assert got == str(value)
            elif how == "same values, sorted":
                assert got == sorted(value)
            elif name == "status":
                assert got == {"ok": "success", None: "unknown"}.get(value, "failure")
            elif name == "destructive":
                assert got == (["change"] if value else ["access"])
            else:
                raise AssertionError(f"the test does not know how to check {how!r}")
        # every field the ECS line has is in the table (what is under auditweb.* by its name)
        written = {
            leaf if not leaf.startswith("auditweb.") else ".".join(leaf.split(".")[:2])
            for leaf in leaves(ecs)
        }
        assert written - documented <= {"user", "client"}, written - documented  # ({} when unknown)
