"""The compose deployment's report path, acted out with processes instead of containers.

A Celery worker and a gunicorn web process, started here the way docker-compose.yml starts
them, against this test run's PostgreSQL and Redis, share one folder and nothing else on
disk: the `reports` volume, REPORT_DIR in both. An investigator asks web for a report over
the API; the worker writes it into the volume; web serves it, byte for byte with the SHA-256
the store holds, and so does a new web process after both were stopped (containers
recreated). A web process without the volume cannot serve it, which is what the compose file
did before it had one. Each process is reported healthy by the compose file's own healthcheck.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from investigations.models import api_token_create
from tests.conftest import FIXTURES, REPO
from tests.processes import Processes, free_port, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())


class Stack(Processes):
    """The app processes of one compose deployment, as local processes on a queue of their own."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp, queue_prefix="auditweb-compose")

    def env(self, **extra: str) -> dict[str, str]:
        key = "compose-test-key-" + uuid.uuid4().hex
        return super().env(
            **{"DEBUG": "false", "SECRET_KEY": key, "ALLOWED_HOSTS": "auditweb.example.com", **extra}
        )

    def worker(self, node: str, reports: Path) -> subprocess.Popen[bytes]:
        """The compose worker's command, with its node named as in a container called `node`."""
        command = [str(part) for part in COMPOSE["services"]["worker"]["command"]]
        assert command[:4] == ["celery", "-A", "auditweb", "worker"]
        command = [sys.executable, "-m", *command, "--pool=solo", f"--hostname=celery@{node}"]
        command = [part for part in command if not part.startswith("--concurrency")]
        env = self.env(REPORT_DIR=str(reports), UPLOAD_DIR=str(self.tmp / f"uploads-{node}"))
        return self.launch(f"worker-{node}", command, env)

    def web(self, name: str, reports: Path, port: int) -> subprocess.Popen[bytes]:
        """The compose web command (gunicorn), on `port` of 127.0.0.1."""
        command = [str(part) for part in COMPOSE["services"]["web"]["command"]]
        assert command[0] == "gunicorn"
        command = [sys.executable, "-m", *command]
        command[command.index("--bind") + 1] = f"127.0.0.1:{port}"
        command[command.index("--workers") + 1] = "1"
        env = self.env(REPORT_DIR=str(reports), UPLOAD_DIR=str(self.tmp / f"uploads-{name}"))
        return self.launch(f"web-{name}", command, env)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


def healthcheck(service: str) -> list[str]:
    test = COMPOSE["services"][service]["healthcheck"]["test"]
    return [str(part) for part in test]


def web_healthy(port: int) -> bool:
    """The compose web healthcheck, aimed at this process's port."""
    kind, *command = healthcheck("web")
    assert kind == "CMD" and command[0] == "python"
    command = [sys.executable, *(part.replace(":8000/", f":{port}/") for part in command[1:])]
    return subprocess.run(command, capture_output=True, timeout=30).returncode == 0


def worker_healthy(stack: Stack, node: str) -> bool:
    """The compose worker healthcheck, run by a shell as Docker runs it in a container whose
    hostname is `node` (compose's `$$` is a literal `$`)."""
    kind, command = healthcheck("worker")
    assert kind == "CMD-SHELL"
    command = command.replace("$$", "$")
    assert command.startswith("celery ")
    command = f"{shlex.quote(sys.executable)} -m {command}"
    env = stack.env(HOSTNAME=node)
    return subprocess.run(["sh", "-c", command], env=env, capture_output=True, timeout=60).returncode == 0


class Api:
    """The REST API of one web process, as a SIEM or a script would call it."""

    def __init__(self, port: int, key: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.key = key

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", f"Token {self.key}")
        request.add_header("Host", "auditweb.example.com")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def json(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        status, _, content = self.call(method, path, body)
        assert status in (200, 201, 202), (status, content[:500])
        return json.loads(content)


def test_a_report_written_by_the_worker_is_downloaded_through_web_and_survives_recreation(
    tmp_path: Path, stack: Stack, investigator: Any, ingest_bytes: Callable[..., Any]
) -> None:
    ingest_bytes((FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log").read_bytes(), server="db1")
    _, key = api_token_create(user=investigator)
    volume = tmp_path / "reports-volume"  # the named volume: nothing else is shared on disk
    web_port = free_port()
    worker = stack.worker("worker1", volume)
    web = stack.web("web1", volume, web_port)
    wait_for(lambda: web_healthy(web_port), stack, "web's healthcheck")
    wait_for(lambda: worker_healthy(stack, "worker1"), stack, "the worker's healthcheck")
    api = Api(web_port, key)

    destructive = api.json("GET", "/api/v1/events/?destructive=true&server=db1")["results"]
    assert destructive
    case = api.json("POST", "/api/v1/cases/", {"title": "Who deleted the orders?", "description": ""})
    for event in destructive:
        api.json("POST", f"/api/v1/cases/{case['id']}/evidence/", {"event": event["id"], "note": "seen"})
    report = api.json("POST", f"/api/v1/cases/{case['id']}/reports/", {"format": "pdf"})
    assert report["status"] == "queued"

    def done() -> bool:
        status = api.json("GET", f"/api/v1/reports/{report['id']}/")
        assert status["status"] != "failed", status
        return status["status"] == "done"

    wait_for(done, stack, "the worker to write the report")
    status = api.json("GET", f"/api/v1/reports/{report['id']}/")
    written = list(volume.rglob("*.pdf"))
    assert len(written) == 1, "the worker writes the report into the shared volume"
    on_disk = written[0].read_bytes()
    assert hashlib.sha256(on_disk).hexdigest() == status["sha256"]

    path = f"/api/v1/reports/{report['id']}/download/"
    code, headers, body = api.call("GET", path)
    assert code == 200
    assert body.startswith(b"%PDF-") and body == on_disk
    assert hashlib.sha256(body).hexdigest() == status["sha256"] == headers["X-Content-SHA256"]

    # `docker compose up --force-recreate`: new processes, the same volume.
    stack.stop(web)
    stack.stop(worker)
    again_port = free_port()
    stack.web("web2", volume, again_port)
    wait_for(lambda: web_healthy(again_port), stack, "the recreated web's healthcheck")
    code, _, again = Api(again_port, key).call("GET", path)
    assert code == 200 and hashlib.sha256(again).hexdigest() == status["sha256"]

    # Without the volume (each container its own folder) web has nothing to serve.
    lost_port = free_port()
    stack.web("without-volume", tmp_path / "web-own-folder", lost_port)
    wait_for(lambda: web_healthy(lost_port), stack, "the web without the volume")
    code, _, body = Api(lost_port, key).call("GET", path)
    assert code == 404 and b"no longer on the server" in body


def test_the_web_healthcheck_fails_while_the_database_cannot_be_reached(tmp_path: Path, stack: Stack) -> None:
    port = free_port()
    closed = free_port()  # nothing listens there
    env = stack.env(
        DATABASE_URL=f"postgres://auditweb@127.0.0.1:{closed}/auditweb",
        REPORT_DIR=str(tmp_path / "reports"),
        UPLOAD_DIR=str(tmp_path / "uploads"),
    )
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "auditweb.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
    ]
    stack.launch("web-no-db", command, env)

    def answers() -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    wait_for(answers, stack, "web to answer")
    assert not web_healthy(port)
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10)
    assert answer.value.code == 503
    checks = json.loads(answer.value.read())
    assert checks["database"].startswith("unavailable") and checks["report_dir"] == "ok"
