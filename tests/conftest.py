"""Shared fixtures: personas and helpers to ingest bytes.

Tests run against a real PostgreSQL (DATABASE_URL; `./dev test` starts an
embedded one when it is not set). Nothing here mocks the database. The fixtures import the
project's models inside themselves: this module is imported before pytest-django sets Django up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import Workers

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
# Third-party sample logs (Percona, MySQL Enterprise, McAfee, MariaDB's docs...), read in place,
# never copied here: the tests of those samples skip, saying so, where ../shared is absent.
CORPUS = SHARED / "corpus"
CORPUS_MISSING = "needs ../shared/corpus (the third-party sample logs) beside the repository"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _log_roots_take_in_the_tests_temporary_folders(settings, tmp_path_factory):
    """File sources read only below AUDITWEB_LOG_ROOTS (/var/log by default); tests follow
    logs they write under pytest's temporary folder, which is a log root for them."""
    settings.LOG_ROOTS = [*settings.LOG_ROOTS, tmp_path_factory.getbasetemp().resolve()]


@pytest.fixture
def investigator(django_user_model):
    from investigations.roles import Role, set_role

    user = django_user_model.objects.create_user("ivy", password="correct horse battery staple")
    set_role(user, Role.INVESTIGATOR)
    return user


@pytest.fixture
def viewer(django_user_model):
    from investigations.roles import Role, set_role

    user = django_user_model.objects.create_user("vic", password="correct horse battery staple")
    set_role(user, Role.VIEWER)
    return user


@pytest.fixture
def admin_user(django_user_model):
    """An admin by role (not a superuser): sources, tokens of others, the audit trail."""
    from investigations.roles import Role, set_role

    user = django_user_model.objects.create_user("ada", password="correct horse battery staple")
    set_role(user, Role.ADMIN)
    return user


@pytest.fixture
def admin_api_client(admin_user):
    from rest_framework.test import APIClient

    from investigations.models import api_token_create

    _, key = api_token_create(user=admin_user)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


@pytest.fixture
def investigator_client(client, investigator):
    client.force_login(investigator)
    return client


@pytest.fixture
def api_client(investigator):
    from rest_framework.test import APIClient

    from investigations.models import api_token_create

    _, key = api_token_create(user=investigator)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


@pytest.fixture
def ingest_bytes(tmp_path):
    """Write `data` to a log file and ingest it; returns the finished IngestRun."""
    from ingest.pipeline import ingest_file, source_for_path

    def _ingest(data: bytes, *, name: str = "general.log", server: str = "test", fmt: str = "auto"):
        path = tmp_path / name
        path.write_bytes(data)
        source = source_for_path(path, server=server, fmt=fmt, tz="UTC")
        return ingest_file(path, source=source, fmt=fmt)

    return _ingest


@pytest.fixture
def report_written(django_capture_on_commit_callbacks):
    """Ask for a report as the case page does, then run the worker's task on commit (as a worker
    would, in this process); returns the report, written (or failed)."""
    from investigations.reports.generate import report_request
    from investigations.tasks import generate_report

    def _write(case, fmt, user):
        with django_capture_on_commit_callbacks(execute=True):
            report = report_request(case=case, fmt=fmt, user=user, queue=generate_report)
        report.refresh_from_db()
        return report

    return _write


@pytest.fixture
def celery_eager():
    """Tasks sent with `.delay()` run at once in this process, as CELERY_TASK_ALWAYS_EAGER does."""
    from auditweb.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = before


@pytest.fixture
def workers(tmp_path):
    """Celery worker processes of the test's own (tests/processes.py), none left after it."""
    w = Workers(tmp_path)
    try:
        yield w
    finally:
        w.stop_all()
