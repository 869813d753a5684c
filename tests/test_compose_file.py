"""docker-compose.yml keeps its reports, mounts the logs read-only, checks its own health, and
runs the README's compose commands as written.

`docker compose config` (or the older `docker-compose config`) resolves the file with a .env
made from .env.example, where either is installed; the rest reads the file itself.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

APP_SERVICES = ("web", "worker", "beat")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def app_env(compose: dict[str, Any], service: str) -> dict[str, str]:
    return {k: str(v) for k, v in compose["services"][service]["environment"].items()}


def mounts(compose: dict[str, Any], service: str) -> dict[str, tuple[str, str]]:
    """Container path -> (source, mode) of a service's short-syntax volumes."""
    found = {}
    for spec in compose["services"][service].get("volumes") or ():
        match = re.fullmatch(r"(\$\{[^}]*\}|[^:]+):([^:]+)(?::(\w+))?", spec)
        assert match, spec
        found[match.group(2)] = (match.group(1), match.group(3) or "rw")
    return found


def management_commands() -> set[str]:
    return {p.stem for p in REPO.glob("*/management/commands/*.py") if not p.stem.startswith("_")}


def readme_compose_commands() -> list[list[str]]:
    """Every `docker compose ...` command of the README's shell blocks and inline code."""
    commands = []
    for match in re.finditer(r"(?m)(?:^|`)(docker compose [^`#\n]*)", (REPO / "README.md").read_text()):
        commands.append(shlex.split(match.group(1).strip()))
    return commands


def test_reports_are_kept_in_one_named_volume_shared_by_web_and_worker(compose: dict[str, Any]) -> None:
    for service in APP_SERVICES:
        folder = app_env(compose, service)["REPORT_DIR"]
        assert mounts(compose, service)[folder] == ("reports", "rw"), service
    assert "reports" in compose["volumes"]


def test_the_image_makes_the_volume_folders_for_its_own_user(compose: dict[str, Any]) -> None:
    """An empty named volume takes the owner of the image's folder: the app user must own them."""
    dockerfile = (REPO / "Dockerfile").read_text()
    for variable in ("REPORT_DIR", "UPLOAD_DIR"):
        folder = app_env(compose, "web")[variable]
        assert re.search(rf"mkdir -p [^\n]*{re.escape(folder)}(\s|$)", dockerfile), folder
        assert folder.startswith("/var/lib/auditweb/")
    assert "chown -R auditweb:auditweb /var/lib/auditweb" in dockerfile


def test_the_logs_are_mounted_read_only_where_the_log_roots_say(compose: dict[str, Any]) -> None:
    for service in APP_SERVICES:
        roots = app_env(compose, service)["AUDITWEB_LOG_ROOTS"].split(",")
        source, mode = mounts(compose, service)["/logs"]
        assert mode == "ro", service
        assert source == "${AUDITWEB_LOGS_DIR:-./logs}", service
        assert "/logs" in roots, service


def test_the_default_logs_folder_is_neither_built_into_the_image_nor_committed() -> None:
    assert "logs" in (REPO / ".dockerignore").read_text().split()
    assert "/logs/" in (REPO / ".gitignore").read_text().split()


def test_web_worker_database_and_broker_have_healthchecks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in ("postgres", "redis", "web", "worker"):
        check = services[name]["healthcheck"]
        assert check["test"] and check["interval"] and check["timeout"] and check["retries"], name
    assert "/healthz" in " ".join(services["web"]["healthcheck"]["test"])
    assert "inspect ping" in " ".join(services["worker"]["healthcheck"]["test"])
    # Each scaled worker pings itself, not any worker: its node is named after its container.
    assert "celery@$$HOSTNAME" in services["worker"]["healthcheck"]["test"][1]


def test_the_app_processes_wait_for_a_healthy_database_and_broker_and_the_migration(
    compose: dict[str, Any],
) -> None:
    for name in APP_SERVICES:
        needs = compose["services"][name]["depends_on"]
        assert needs["postgres"]["condition"] == "service_healthy", name
        assert needs["redis"]["condition"] == "service_healthy", name
        assert needs["migrate"]["condition"] == "service_completed_successfully", name


def test_the_worker_concurrency_comes_from_the_environment(compose: dict[str, Any]) -> None:
    command = compose["services"]["worker"]["command"]
    assert "--concurrency=${AUDITWEB_WORKER_CONCURRENCY:-2}" in command


def test_every_compose_command_of_the_readme_names_services_and_paths_the_file_has(
    compose: dict[str, Any],
) -> None:
    commands = readme_compose_commands()
    assert len(commands) >= 4
    services = compose["services"]
    for command in commands:
        assert command[:2] == ["docker", "compose"], command
        verb = command[2]
        assert verb in {"up", "exec", "logs", "ps", "down", "restart", "config", "run"}, command
        if verb == "exec":
            service = command[3]
            assert service in services, command
            if command[4:6] == ["python", "manage.py"]:
                assert command[6] in management_commands(), command
            # Paths given to `ingest` lie under the logs mount of that service.
            if "ingest" in command:
                for path in command[command.index("ingest") + 1 :]:
                    if path.startswith("/"):
                        assert PurePosixPath(path).is_relative_to("/logs"), command
                        assert "/logs" in mounts(compose, service), command
        if "--scale" in command:
            name = command[command.index("--scale") + 1].split("=")[0]
            assert name in services and "ports" not in services[name], command


def compose_config_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_docker_compose_config_accepts_the_file_with_the_example_env(tmp_path: Path) -> None:
    command = compose_config_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    shutil.copy(REPO / "docker-compose.yml", tmp_path)
    env = (REPO / ".env.example").read_text()
    env = re.sub(r"(?m)^SECRET_KEY=$", "SECRET_KEY=compose-config-test", env)
    env = re.sub(r"(?m)^POSTGRES_PASSWORD=$", "POSTGRES_PASSWORD=pw", env)
    env = re.sub(r"(?m)^AUDITWEB_WORKER_CONCURRENCY=.*$", "AUDITWEB_WORKER_CONCURRENCY=3", env)
    env = re.sub(r"(?m)^AUDITWEB_LOGS_DIR=.*$", "AUDITWEB_LOGS_DIR=/srv/mysql-logs", env)
    (tmp_path / ".env").write_text(env)
    done = subprocess.run([*command, "config"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    worker = resolved["services"]["worker"]
    assert "--concurrency=3" in worker["command"]
    volumes = [v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in worker["volumes"]]
    assert any(v.startswith("/srv/mysql-logs:/logs") for v in volumes), volumes
    assert resolved["services"]["web"]["healthcheck"]["test"][0] == "CMD"


def test_docker_compose_config_refuses_to_run_without_the_database_password(tmp_path: Path) -> None:
    command = compose_config_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    shutil.copy(REPO / "docker-compose.yml", tmp_path)
    (tmp_path / ".env").write_text("SECRET_KEY=x\n")
    done = subprocess.run([*command, "config"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "POSTGRES_PASSWORD" in done.stderr
