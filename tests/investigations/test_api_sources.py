"""POST /api/v1/sources/: a client that sends the documented fields gets its source, with the
model's defaults for every field it leaves out (DESIGN.md, "Sources")."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.models import Source
from ingest.sources import SourceForm

pytestmark = pytest.mark.django_db

# The fields DESIGN.md documents for a source a client creates.
DOCUMENTED = {
    "name": "db1 general log",
    "kind": "file",
    "path": "/var/log/mysql/general.log*",
    "dsn": "",
    "format": "general-log",
    "server": "db1",
    "timezone": "UTC",
    "interval_seconds": 60,
    "enabled": True,
}
# Every input field with a model default, and a value other than that default.
NOT_DEFAULT: dict[str, Any] = {
    "kind": "mysql-table",
    "password_env": "AUDITWEB_SOURCE_DB1_PASSWORD",
    "format": "mariadb-audit",
    "timezone": "Europe/Berlin",
    "interval_seconds": 5,
    "quiet_seconds": 120,
    "enabled": False,
}


def post(client: Any, fields: dict[str, Any]) -> Any:
    return client.post("/api/v1/sources/", fields, format="json")


def test_the_documented_fields_alone_make_a_source_with_the_other_defaults(admin_api_client) -> None:
    response = post(admin_api_client, DOCUMENTED)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["quiet_seconds"], body["password_env"]) == (3600, "AUDITWEB_SOURCE_MYSQL_PASSWORD")
    source = Source.objects.get(pk=body["id"])
    assert (source.name, source.path, source.format, source.server, source.enabled) == (
        "db1 general log",
        "/var/log/mysql/general.log*",
        "general-log",
        "db1",
        True,
    )
    assert (source.quiet_seconds, source.password_env) == (3600, "AUDITWEB_SOURCE_MYSQL_PASSWORD")


def test_every_input_field_with_a_default_is_listed_here() -> None:
    with_default = [f for f in SourceForm.Meta.fields if Source._meta.get_field(f).has_default()]
    assert sorted(with_default) == sorted(NOT_DEFAULT)


@pytest.mark.parametrize("left_out", sorted(NOT_DEFAULT))
def test_a_field_left_out_takes_its_default_and_the_others_are_kept(admin_api_client, left_out) -> None:
    fields = {"name": "db1", "server": "db1", "path": "/var/log/db1.log", "dsn": "mysql://auditweb@db1:3306"}
    fields.update({k: v for k, v in NOT_DEFAULT.items() if k != left_out})
    response = post(admin_api_client, fields)
    assert response.status_code == 201, response.json()
    source = Source.objects.get(pk=response.json()["id"])
    for name, value in NOT_DEFAULT.items():
        expected = Source._meta.get_field(name).get_default() if name == left_out else value
        assert getattr(source, name) == expected, name


def test_name_path_and_server_alone_make_a_file_source_with_every_default(admin_api_client) -> None:
    response = post(admin_api_client, {"name": "db2", "server": "db2", "path": "/var/log/db2/*.log"})
    assert response.status_code == 201, response.json()
    source = Source.objects.get(pk=response.json()["id"])
    assert (
        source.kind,
        source.format,
        source.timezone,
        source.interval_seconds,
        source.quiet_seconds,
        source.enabled,
        source.password_env,
        source.dsn,
    ) == ("file", "auto", "UTC", 60, 3600, True, "AUDITWEB_SOURCE_MYSQL_PASSWORD", "")


@pytest.mark.parametrize("left_out", ["name", "server"])
def test_a_field_without_a_default_is_still_required(admin_api_client, left_out) -> None:
    response = post(admin_api_client, {k: v for k, v in DOCUMENTED.items() if k != left_out})
    assert response.status_code == 400
    assert list(response.json()) == [left_out]
    assert not Source.objects.exists()


def test_a_value_sent_as_null_is_refused_not_defaulted(admin_api_client) -> None:
    response = post(admin_api_client, {**DOCUMENTED, "quiet_seconds": None})
    assert response.status_code == 400
    assert list(response.json()) == ["quiet_seconds"]


def test_the_schema_requires_only_the_fields_without_a_default(api_client) -> None:
    schema = api_client.get("/api/schema/", {"format": "json"}).json()
    body = schema["paths"]["/api/v1/sources/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    component = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    assert sorted(component["required"]) == ["name", "server"]
