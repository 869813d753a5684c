"""Property-based checks of the whole REST API against its own live OpenAPI schema (Schemathesis).

Every operation of `/api/schema/` (read from the app in this process, so a new endpoint is
checked as soon as it is there) is called with generated parameters, valid and invalid, as an
admin over the crime scene's events; no answer may be a server error or differ from what the
schema says. `MAX_EXAMPLES` derandomized cases an operation; the two checks set aside, and why:
"The REST API" in docs/architecture.md.
"""

from __future__ import annotations

import io
import re

import pytest
import schemathesis
from django.core.management import call_command
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from schemathesis.core.failures import AcceptedNegativeData, FailureGroup
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from .conftest import FIXTURES

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = 25
CRIME = FIXTURES / "crime_scene"
LOGS = [
    ("mariadb-10.11.19-general.log", "general-log", "crime-general"),
    ("mariadb-10.11.19-server_audit.log", "mariadb-audit", "crime-audit"),
    ("mariadb-10.11.19-general_log-1.CSV", "general-log-csv", "crime-table"),
]


@pytest.fixture
def admin_token(django_user_model) -> str:
    from investigations.models import api_token_create
    from investigations.roles import Role, set_role

    admin = django_user_model.objects.create_user("adele")
    set_role(admin, Role.ADMIN)
    return api_token_create(user=admin)[1]


@pytest.fixture
def wsgi_app():
    """The application, called in this thread inside the test's transaction. Django closes a
    connection that is not in autocommit when a request starts or ends (the test transaction's
    is not), so, as Django's own test client does, that is switched off meanwhile."""
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(admin_token, wsgi_app):
    for name, fmt, server in LOGS:
        call_command("ingest", str(CRIME / name), "--format", fmt, "--server", server, "--timezone", "UTC",
                     stdout=io.StringIO())  # fmt: skip
    return schemathesis.openapi.from_wsgi(
        "/api/schema/", wsgi_app, headers={"Authorization": f"Token {admin_token}"}
    )


# Real ids for the path parameters (a generated id is almost never one that exists).
def real_ids() -> dict[str, int]:
    from ingest.models import Event, IngestRun, Session, Source

    return {
        "event_id": Event.objects.filter(destructive=True).order_by("id").values_list("id", flat=True)[0],
        "session_id": Session.objects.order_by("id").values_list("id", flat=True)[0],
        "source_id": Source.objects.order_by("id").values_list("id", flat=True)[0],
        "run_id": IngestRun.objects.order_by("id").values_list("id", flat=True)[0],
        "name": "shop.orders",
    }


def cases(operation, ids: dict) -> st.SearchStrategy:
    """Valid and invalid requests for the operation, on made-up and on real rows."""
    own = {p.name: ids[p.name] for p in operation.path_parameters if p.name in ids}
    return st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
        operation.as_strategy(GenerationMode.POSITIVE, path_parameters=own),
        operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=own),
    )


def _as_sent(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def valid_as_sent(failure: Exception, case, schema: dict) -> bool:
    """Whether an accepted "invalid" request was in fact valid as it went over the wire: the
    invalid part is a repeatable (array) query parameter whose values, as text, fit its schema."""
    if not isinstance(failure, AcceptedNegativeData):
        return False
    found = re.search(r"parameter `([^`]+)` in query", failure.message)
    if found is None or not case.query or found.group(1) not in case.query:
        return False
    name = found.group(1)
    parameters = schema["paths"][case.operation.path][case.operation.method.lower()].get("parameters", [])
    declared = next((p for p in parameters if p.get("in") == "query" and p.get("name") == name), None)
    if declared is None or declared.get("schema", {}).get("type") != "array":
        return False
    value = case.query[name]
    sent = [_as_sent(v) for v in (value if isinstance(value, list) else [value])]
    return Draft202012Validator(declared["schema"]).is_valid(sent)


def test_the_api_answers_every_generated_request_as_its_schema_says(api_schema, admin_token) -> None:
    headers = {"Authorization": f"Token {admin_token}"}
    ids = real_ids()
    raw = api_schema.raw_schema
    failures, checked = [], []
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=MAX_EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],  # no shrinking: report the first failure as it is
        )
        @given(case=cases(operation, ids))
        def check(case) -> None:
            try:
                case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])
            except FailureGroup as group:
                if not all(valid_as_sent(f, case, raw) for f in group.exceptions):
                    raise

        try:
            check()
        except (Exception, BaseExceptionGroup) as e:  # every operation is checked; all failures reported
            failures.append(f"{operation.label}:\n{e}")
        checked.append(operation.label)
    assert len(checked) >= 15, checked
    assert not failures, "\n\n".join(failures)
