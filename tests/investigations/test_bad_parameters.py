"""No parameter of any page or API answer makes a 500 (issue 18, item 10): every GET route of the
URL configuration (as test_permissions walks them, with a real object behind each id) is asked
once to learn which query parameters its view reads, then once per such parameter and per
hostile value (NUL, which PostgreSQL text and the audit trail's JSON cannot hold; a non-ASCII
digit, which str.isdigit takes and int() may not; a number past 64 bits; a long text; a
malformed cursor). Each must be answered below 500."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.http import QueryDict

from investigations.roles import Role
from tests.investigations.test_permissions import (  # noqa: F401 - fixtures used by name
    ROUTES_WITH_A_ROLE,
    Route,
    World,
    declared_roles,
    personas,
    url_of,
    world,
)

pytestmark = pytest.mark.django_db

HOSTILE = {
    "nul": "a\x00b",
    "non-ascii digit": "²",
    "past 64 bits": "9" * 40,
    "negative": "-5",
    "long text": "x" * 20_000,
    "malformed cursor": "x!~%2",
}
# Parameters every list accepts through shared code, asked on every route in case a view reads
# them without saying so; the rest are learnt from what each view reads.
ALWAYS = ("cursor", "page", "page_size", "after", "q")
GET_ROUTES = [r for r in ROUTES_WITH_A_ROLE if "GET" in (declared_roles(r) or {})]


@contextlib.contextmanager
def reading_parameters() -> Iterator[set[str]]:
    """The names of the query parameters a request's view asks for (QueryDict reads, recorded)."""
    asked: set[str] = set()
    originals = {name: getattr(QueryDict, name) for name in ("get", "getlist", "__getitem__", "__contains__")}

    def recording(name: str) -> Any:
        def read(self: QueryDict, key: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(key, str):
                asked.add(key)
            return originals[name](self, key, *args, **kwargs)

        return read

    for name in originals:
        setattr(QueryDict, name, recording(name))
    try:
        yield asked
    finally:
        for name, method in originals.items():
            setattr(QueryDict, name, method)


@pytest.mark.parametrize("route", GET_ROUTES, ids=[r.name for r in GET_ROUTES])
def test_no_parameter_value_makes_a_server_error(route: Route, world: World, personas) -> None:  # noqa: F811
    admin = personas[Role.ADMIN]
    client = admin.api if route.api_view is not None else admin.page
    client.raise_request_exception = False  # a 500 is counted, not raised
    url = url_of(route, world, admin.user)
    with reading_parameters() as asked:
        first = client.get(url)
    assert first.status_code < 500, (url, first.status_code)
    failures = []
    for name in sorted(asked | set(ALWAYS)):
        for what, value in HOSTILE.items():
            saved = transaction.savepoint()  # a database error must not spoil the next request
            response = client.get(url, {name: value})
            transaction.savepoint_rollback(saved)
            if response.status_code >= 500:
                failures.append(f"{url}?{name}=<{what}>: {response.status_code}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    "sent",
    ["general[1].log", "*.log", "?", "x" * 300 + ".log.gz", "журнал-" * 40 + ".log", "../../etc/cron.d/x"],
    ids=["brackets", "star", "question-mark", "300-characters", "long-cyrillic", "path"],
)
def test_an_upload_of_any_name_is_kept_read_and_recorded(
    investigator_client, settings, tmp_path, sent
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from ingest.models import SourceFile
    from investigations.trail import Action, AuditRecord

    settings.UPLOAD_DIR = tmp_path / "uploads"
    body = b"2026-03-01T09:00:00.000000Z\t  100 Query\tDELETE FROM shop.orders\n"
    fields = {
        "file": SimpleUploadedFile(sent, body),
        "server": "db9",
        "format": "general-log",
        "timezone": "UTC",
    }
    response = investigator_client.post("/sources/upload/", fields)
    assert response.status_code == 302
    kept = SourceFile.objects.get(source__kind="upload")
    assert Path(kept.path).read_bytes() == body and Path(kept.path).parent.parent == settings.UPLOAD_DIR
    assert [p for p in settings.UPLOAD_DIR.rglob("*") if p.is_file()] == [Path(kept.path)]  # no orphan
    assert AuditRecord.objects.get(action=Action.UPLOAD).details["source"] == kept.source_id
