"""The server deployment files hang together: docker-compose.yml, Dockerfile, .env.example.

Docker cannot run here, so these read the files: valid YAML, the five services with the
right commands, and every variable that compose or the settings use documented in .env.example.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
APP_SERVICES = ("web", "worker", "beat")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def command_of(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def env_example_names() -> set[str]:
    names = set()
    for line in (REPO / ".env.example").read_text().splitlines():
        match = re.match(r"\s*#?\s*([A-Z][A-Z0-9_]*)=", line)
        if match:
            names.add(match.group(1))
    return names


def test_compose_has_the_database_broker_and_the_three_app_processes(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"postgres", "redis", *APP_SERVICES} <= set(services)
    assert services["postgres"]["image"].startswith("postgres:17")
    assert services["redis"]["image"].startswith("redis:7")


def test_app_processes_run_the_image_built_from_the_dockerfile(compose: dict[str, Any]) -> None:
    assert (REPO / "Dockerfile").is_file()
    for name in APP_SERVICES:
        service = compose["services"][name]
        build = service["build"]
        context = build if isinstance(build, str) else build.get("context", ".")
        assert context == ".", name


def test_app_processes_start_after_the_database_and_broker(compose: dict[str, Any]) -> None:
    services = compose["services"]

    def needs(name: str) -> set[str]:
        direct = set(services[name].get("depends_on") or ())
        return direct.union(*(needs(other) for other in direct))

    for name in APP_SERVICES:
        assert {"postgres", "redis"} <= needs(name), name


def test_web_serves_the_wsgi_app_with_gunicorn(compose: dict[str, Any]) -> None:
    command = command_of(compose["services"]["web"])
    assert command[0] == "gunicorn"
    assert "auditweb.wsgi" in command or "auditweb.wsgi:application" in command


@pytest.mark.parametrize("service, role", [("worker", "worker"), ("beat", "beat")])
def test_worker_and_beat_run_the_auditweb_celery_app(
    compose: dict[str, Any], service: str, role: str
) -> None:
    command = command_of(compose["services"][service])
    assert command[:4] == ["celery", "-A", "auditweb", role]


def test_database_and_broker_urls_point_at_the_compose_services(compose: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        environment = compose["services"][name]["environment"]
        assert "@postgres:5432/" in environment["DATABASE_URL"], name
        assert environment["REDIS_URL"].startswith("redis://redis:6379/"), name


def test_every_variable_compose_uses_is_in_env_example(compose: dict[str, Any]) -> None:
    text = (REPO / "docker-compose.yml").read_text()
    interpolated = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    handed_to_app = set()
    for name in APP_SERVICES:
        environment = compose["services"][name].get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) for item in environment)
        handed_to_app |= set(environment)
    missing = (interpolated | handed_to_app) - env_example_names()
    assert not missing, f"add to .env.example: {sorted(missing)}"


def test_every_variable_the_settings_read_is_in_env_example() -> None:
    settings = (REPO / "auditweb" / "settings.py").read_text()
    read = set(re.findall(r"env_[a-z]+\(\s*[\"']([A-Z][A-Z0-9_]*)[\"']", settings))
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS"} <= read
    missing = read - env_example_names()
    assert not missing, f"add to .env.example: {sorted(missing)}"


def test_image_installs_the_lock_and_runs_as_a_non_root_user() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", dockerfile, re.M)
    assert "pip install --require-hashes --no-deps -r requirements.lock" in dockerfile
    assert "collectstatic --no-input" in dockerfile
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert users and users[-1] not in ("root", "0")
