"""Binlog sources as the operator makes them (the form, the API, the pages), and how a poll
lists and recognises binlog files; the reading itself is tests/binlog/test_binlog_follow.py."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ingest.binlog_follow import is_binlog_source, list_binlogs
from ingest.models import Source

pytestmark = pytest.mark.django_db
SCENE = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_scene"
BINLOG = SCENE / "mariadb-10.11.19-mariadb-bin.000001"


def test_a_replica_source_is_made_over_the_api_with_format_binlog(admin_api_client: Any) -> None:
    response = admin_api_client.post(
        "/api/v1/sources/",
        {"name": "db1 binlog", "kind": "binlog-replica", "dsn": "mysql://repl@db1:3306", "server": "db1"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    source = Source.objects.get(pk=response.json()["id"])
    assert (source.kind, source.format, source.dsn) == ("binlog-replica", "binlog", "mysql://repl@db1:3306")


@pytest.mark.parametrize(
    ("dsn", "error"),
    [("", "binary log to pull"), ("mysql://repl:secret@db1:3306", "No password in the DSN")],
)
def test_a_replica_source_needs_a_dsn_without_password(admin_api_client: Any, dsn: str, error: str) -> None:
    response = admin_api_client.post(
        "/api/v1/sources/", {"name": "db1 binlog", "kind": "binlog-replica", "dsn": dsn, "server": "db1"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert error in str(response.json())
    assert not Source.objects.exists()


def test_the_sources_pages_show_a_replica_sources_dsn_and_spool(admin_client: Any, settings: Any) -> None:
    source = Source.objects.create(
        name="db1 binlog", kind="binlog-replica", dsn="mysql://repl@db1:3306", format="binlog", server="db1"
    )
    listing = admin_client.get("/sources/").content.decode()
    assert "mysql://repl@db1:3306" in listing and "binary log pulled as a replica" in listing
    page = admin_client.get(f"/sources/{source.pk}/").content.decode()
    assert str(Path(settings.BINLOG_SPOOL_DIR) / f"source-{source.pk}") in page
    assert "(Auto)" not in page and "$AUDITWEB_SOURCE_MYSQL_PASSWORD" in page


def test_only_numbered_files_are_binlogs_and_others_are_named(tmp_path: Path) -> None:
    for name in ("mariadb-bin.000002", "mariadb-bin.000010", "mariadb-bin.000001"):
        shutil.copy(BINLOG, tmp_path / name)
    (tmp_path / "mariadb-bin.index").write_text("./mariadb-bin.000001\n")
    (tmp_path / "mariadb-bin.state").write_bytes(b"")
    (tmp_path / "mariadb-bin.old").write_bytes(b"")
    files, notes = list_binlogs(str(tmp_path / "mariadb-bin.*"))
    assert [f.path.name for f in files] == ["mariadb-bin.000001", "mariadb-bin.000002", "mariadb-bin.000010"]
    assert [f.number for f in files] == [1, 2, 10]
    assert notes == [f"{tmp_path / 'mariadb-bin.old'} is not a numbered binlog file: not read"]


def test_format_auto_recognises_binlogs_by_their_magic(tmp_path: Path) -> None:
    shutil.copy(BINLOG, tmp_path / "mariadb-bin.000001")
    (tmp_path / "general.log.1").write_bytes(b"/usr/sbin/mariadbd, Version: 10.11\n")
    binlogs = Source(name="b", path=str(tmp_path / "mariadb-bin.[0-9]*"), server="db1")
    logs = Source(name="g", path=str(tmp_path / "general.log.*"), server="db1")
    assert is_binlog_source(binlogs) and not is_binlog_source(logs)
    assert is_binlog_source(
        Source(name="x", path=str(tmp_path / "general.log.*"), format="binlog", server="db1")
    )
