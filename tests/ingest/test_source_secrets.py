"""A mysql-table source cannot make the worker send its own secrets (issue 18, item 7): its password
comes only from a variable named AUDITWEB_SOURCE_..., and a server that asks for the password in
clear text (mysql_clear_password, MariaDB's dialog) gets nothing unless TLS with a verified
certificate is on. The peer is a tiny fake MySQL server on 127.0.0.1 that asks for clear text and
keeps every byte the client sends it."""

from __future__ import annotations

import importlib
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from django.apps import apps

from ingest.follow import ingest_source
from ingest.models import IngestRun, Source
from ingest.mysql_table import connect, source_password

SECRET = "worker-own-secret-8d3f"
# Capabilities: LONG_PASSWORD, PROTOCOL_41, TRANSACTIONS, SECURE_CONNECTION, PLUGIN_AUTH (no SSL).
CAPABILITIES = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x80000


def _packet(seq: int, payload: bytes) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def _read_packet(conn: socket.socket) -> bytes | None:
    header = b""
    while len(header) < 4:
        chunk = conn.recv(4 - len(header))
        if not chunk:
            return None
        header += chunk
    length = int.from_bytes(header[:3], "little")
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    return body


class ClearTextServer:
    """Greets as MySQL 5.7 with mysql_native_password, then switches to `plugin` (asking for the
    password as it is) and records everything the client sends, then says OK."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.received = b""
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
                break
            except TimeoutError:
                continue
            except OSError:
                return
        else:
            return
        self.connections += 1
        with conn:
            conn.settimeout(3)
            salt = b"abcdefgh" + b"ijklmnopqrst"
            greeting = (
                b"\x0a5.7.99-fake\x00" + struct.pack("<I", 7) + salt[:8] + b"\x00"
                + struct.pack("<HBHH", CAPABILITIES & 0xFFFF, 33, 2, CAPABILITIES >> 16)
                + bytes([21]) + b"\x00" * 10 + salt[8:] + b"\x00" + b"mysql_native_password\x00"
            )  # fmt: skip
            conn.sendall(_packet(0, greeting))
            try:
                response = _read_packet(conn)
                self.received += response or b""
                question = b"\x04Password: " if self.plugin == "dialog" else b""
                conn.sendall(_packet(2, b"\xfe" + self.plugin.encode() + b"\x00" + question))
                answer = _read_packet(conn)
                self.received += answer or b""
                conn.sendall(_packet(4, b"\x00\x00\x00\x02\x00\x00\x00"))  # OK: logged in
                while (more := _read_packet(conn)) is not None:  # what a connected client says
                    self.received += more
                    conn.sendall(_packet(1, b"\x00\x00\x00\x02\x00\x00\x00"))
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture(params=["mysql_clear_password", "dialog"])
def clear_text_server(request: pytest.FixtureRequest) -> Iterator[ClearTextServer]:
    server = ClearTextServer(request.param)
    yield server
    server.close()


def test_a_server_asking_for_the_password_in_clear_text_gets_nothing(
    clear_text_server: ClearTextServer,
) -> None:
    with pytest.raises(pymysql.err.OperationalError, match="clear text"):
        connect(f"mysql://reader@127.0.0.1:{clear_text_server.port}", SECRET, timeout=5)
    clear_text_server.close()
    assert clear_text_server.connections == 1  # it was asked, and refused
    assert SECRET.encode() not in clear_text_server.received


@pytest.mark.django_db
@pytest.mark.parametrize("variable", ["SECRET_KEY", "DATABASE_URL", "AUDITWEB_MYSQL_PASSWORD_X"])
def test_a_source_naming_one_of_the_workers_own_variables_is_refused_without_reading_it(
    clear_text_server: ClearTextServer, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """A row made before the rule (or written past the form): the worker reads no such variable."""
    monkeypatch.setenv(variable, SECRET)
    source = Source.objects.create(
        name="hostile", kind=Source.Kind.MYSQL_TABLE, server="db9", password_env=variable,
        dsn=f"mysql://reader@127.0.0.1:{clear_text_server.port}",
    )  # fmt: skip
    run = ingest_source(source.pk)
    assert run is not None and run.status == IngestRun.Status.FAILED
    assert "AUDITWEB_SOURCE_" in Source.objects.get(pk=source.pk).last_error
    clear_text_server.close()
    assert clear_text_server.connections == 0
    assert SECRET.encode() not in clear_text_server.received


@pytest.mark.django_db
@pytest.mark.parametrize("variable", ["SECRET_KEY", "DATABASE_URL", "auditweb_source_x", "AUDITWEB_SOURCE_"])
def test_the_api_refuses_a_password_variable_without_the_prefix(admin_api_client: Any, variable: str) -> None:
    response = admin_api_client.post(
        "/api/v1/sources/",
        {"name": "db9", "kind": "mysql-table", "dsn": "mysql://reader@db9:3306", "server": "db9",
         "password_env": variable},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert "AUDITWEB_SOURCE_" in str(response.json()["password_env"])
    assert not Source.objects.filter(name="db9").exists()


def test_the_default_variable_falls_back_to_the_name_it_had_before() -> None:
    old = {"AUDITWEB_MYSQL_PASSWORD": "old", "SECRET_KEY": "no"}
    assert source_password("AUDITWEB_SOURCE_MYSQL_PASSWORD", old) == "old"
    assert (
        source_password("AUDITWEB_SOURCE_MYSQL_PASSWORD", {**old, "AUDITWEB_SOURCE_MYSQL_PASSWORD": "new"})
        == "new"
    )
    assert source_password("AUDITWEB_SOURCE_DB1", old) is None
    assert source_password("", old) is None
    with pytest.raises(ValueError, match="AUDITWEB_SOURCE_"):
        source_password("SECRET_KEY", old)


@pytest.mark.django_db
def test_the_data_migration_gives_every_stored_name_the_prefix() -> None:
    migration = importlib.import_module(
        "ingest.migrations.0015_source_passwords_from_auditweb_source_variables"
    )
    names = {
        "AUDITWEB_MYSQL_PASSWORD": "AUDITWEB_SOURCE_MYSQL_PASSWORD",
        "DB1_PASSWORD": "AUDITWEB_SOURCE_DB1_PASSWORD",
        "SECRET_KEY": "AUDITWEB_SOURCE_SECRET_KEY",
        "db-2.pw": "AUDITWEB_SOURCE_DB_2_PW",
        "AUDITWEB_SOURCE_KEPT": "AUDITWEB_SOURCE_KEPT",
        "": "",
    }
    for n, name in enumerate(names):
        Source.objects.create(name=f"s{n}", kind=Source.Kind.MYSQL_TABLE, server="s", password_env=name)
    migration.prefix_names(apps, None)
    stored = dict(Source.objects.filter(name__startswith="s").values_list("name", "password_env"))
    assert [stored[f"s{n}"] for n in range(len(names))] == list(names.values())
