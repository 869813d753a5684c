"""/healthz, which the compose healthcheck asks from inside the web container."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def folders(settings, tmp_path: Path):
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.REPORT_DIR = tmp_path / "reports"
    return settings


def test_it_answers_ok_without_a_login_when_the_database_and_folders_are_there(client, folders) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": "ok", "upload_dir": "ok", "report_dir": "ok"}
    assert answer["Cache-Control"] == "no-store"
    assert (folders.REPORT_DIR).is_dir()  # a fresh volume's folder is made, as a worker would


def test_it_answers_the_probe_from_inside_the_container_whatever_the_host_and_scheme(client, folders) -> None:
    folders.ALLOWED_HOSTS = ["auditweb.example.com"]
    folders.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz", HTTP_HOST="127.0.0.1:8000").status_code == 200
    # Every other address still checks the host and redirects to HTTPS.
    assert client.get("/accounts/login/", HTTP_HOST="127.0.0.1:8000").status_code == 400
    assert client.get("/accounts/login/", HTTP_HOST="auditweb.example.com").status_code == 301


def test_it_is_unhealthy_when_the_report_volume_cannot_be_used(client, folders, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the volume should be")
    folders.REPORT_DIR = blocker / "reports"
    answer = client.get("/healthz")
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "unhealthy" and body["database"] == "ok" and body["upload_dir"] == "ok"
    assert body["report_dir"].startswith("cannot be created")
    assert str(tmp_path) not in answer.content.decode()  # no path of the server is told


def test_it_answers_head_and_leaves_other_methods_to_the_app(client, folders) -> None:
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code != 200
    assert client.get("/healthz/").status_code != 200
