"""Every page and API endpoint, for every role: exactly what the role allows.

The routes are not listed here by hand: they are read from the URL configuration, so a route
added anywhere is tested, and one that does not declare its role fails the test with the
line to add. For each route and each method it answers:

- anonymous: a page sends to the login page (302), the API answers 401;
- a login in no role, and every role below the declared one: 403;
- the declared role and those above it: neither 401/403 nor a login redirect (a real object
  stands behind every id in the URL, so the view does its work).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.permissions import SAFE_METHODS
from rest_framework.test import APIClient
from rest_framework.views import APIView

from ingest.models import BinlogFile, BinlogStatement, BinlogTransaction, Event, IngestRun
from investigations.cases import case_create, evidence_pin, saved_filter_add
from investigations.models import Case, SavedFilter, api_token_create
from investigations.roles import SIEM_REFUSED, SIEM_VIEWS, Role, set_role
from tests.investigations.logs import genlog

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

# Routes that declare no role on purpose, and why. Nothing else may be missing a role.
NO_ROLE = {
    "login": "the login page itself",
    "logout": "leaving needs no role (a login in no role may log out too)",
}
# The Django admin keeps its own rule (is_staff / superuser); tested below on its index.
ADMIN_NAMESPACE = "admin"

# Where a URL names an object: how the test makes a real one, from the world (below) and the
# user asking (None: anonymous). A new kind of id in a URL needs a line here.
OBJECTS: dict[str, Callable[[World, Any], object]] = {
    "event_id": lambda w, user: w.event.pk,
    "session_id": lambda w, user: w.event.session_id,
    "source_id": lambda w, user: w.run.source_id,
    "run_id": lambda w, user: w.run.pk,
    "name": lambda w, user: "shop.orders",  # a table
    # One's own token (a fresh one each time: revoking is done once).
    "token_id": lambda w, user: api_token_create(user=user or w.owner)[0].pk,
    "user_id": lambda w, user: w.owner.pk,  # a login to change (an admin's page)
    "case_id": lambda w, user: w.case.pk,
    # A fresh saved search each time: removing one is done once.
    "filter_id": lambda w, user: saved_filter_add(case=w.case, user=w.owner, name="ann", query="user=ann").pk,
    "report_id": lambda w, user: w.case.reports.get().pk,
    # One's own saved search (outside cases), a fresh one each time: deleting is done once.
    "saved_id": lambda w, user: (
        SavedFilter.objects.create(name="mine", query="user=ann", created_by=user or w.owner).pk
    ),
    "statement_id": lambda w, user: _binlog_statement(w).pk,  # a binlog row statement (no rows)
}


def _binlog_statement(w: World) -> BinlogStatement:
    binlog, _ = BinlogFile.objects.get_or_create(
        source_file=w.run.source_file,
        defaults={"server": "db1", "name": "bin.000001", "server_version": "x", "server_id": 1},
    )
    tx, _ = BinlogTransaction.objects.get_or_create(
        file=binlog, server="db1", file_name="bin.000001", start=4, end=400, server_id=1, commit_time=T0,
        ended_by="xid",
    )  # fmt: skip
    statement, _ = BinlogStatement.objects.get_or_create(transaction=tx, index=0, time=T0)
    return statement


PERSONAS: tuple[Role | None, ...] = (None, *Role)  # None: a login in no role


@dataclass
class World:
    event: Event
    run: IngestRun
    owner: Any  # a user owning what an anonymous request names
    case: Case  # with the event pinned, a saved search and a report; every persona investigates it


@dataclass
class Persona:
    user: Any
    page: Any  # a logged-in test client
    api: APIClient  # with a token of the user


@dataclass
class Route:
    name: str
    pattern: str
    callback: Any
    kwargs: list[str]

    @property
    def api_view(self) -> type[APIView] | None:
        cls = getattr(self.callback, "cls", None)  # DRF: as_view() and @api_view keep their class here
        return cls if isinstance(cls, type) and issubclass(cls, APIView) else None


def _kwargs_of(pattern: Any) -> list[str]:
    return list(getattr(pattern, "converters", None) or pattern.regex.groupindex)


def _routes(
    patterns: list[Any], prefix: str = "", namespace: str | None = None, kwargs: tuple[str, ...] = ()
) -> Iterator[Route]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _routes(
                entry.url_patterns,
                prefix + str(entry.pattern),
                entry.namespace or namespace,
                (*kwargs, *_kwargs_of(entry.pattern)),
            )
        elif isinstance(entry, URLPattern) and namespace != ADMIN_NAMESPACE:
            name = f"{namespace}:{entry.name}" if namespace and entry.name else entry.name or ""
            route = prefix + str(entry.pattern)
            yield Route(name, route, entry.callback, [*kwargs, *_kwargs_of(entry.pattern)])


ROUTES = list(_routes(get_resolver().url_patterns))


def declared_roles(route: Route) -> dict[str, Role] | None:
    """{method: role} as the view itself declares it; None when it declares nothing."""
    cls = route.api_view
    if cls is None:
        role = getattr(route.callback, "required_role", None)
        return {"GET": role, "POST": role} if role is not None else None
    initkwargs = getattr(route.callback, "initkwargs", {})
    permissions = initkwargs.get("permission_classes", cls.permission_classes)
    declaring = [p for p in permissions if getattr(p, "required_role", None) is not None]
    if not declaring:
        return None
    methods = [m.upper() for m in ("get", "post", "put", "patch", "delete") if m in cls.http_method_names]
    roles = {}
    for method in methods:
        if hasattr(cls, method.lower()):
            attr = "required_role" if method in SAFE_METHODS else "required_write_role"
            roles[method] = max(getattr(p, attr, p.required_role) for p in declaring)
    return roles


def how_to_declare(route: Route) -> str:
    if route.api_view is not None:
        return (
            f"the API view {route.pattern!r} (name {route.name!r}) declares no role. Add, below its "
            "@api_view(...): @permission_classes([role_permission(Role.VIEWER)]) (or INVESTIGATOR, "
            "ADMIN; role_permission(Role.VIEWER, write=Role.ADMIN) where changes need more), from "
            "investigations.roles; for a class view, as_view(permission_classes=[...])."
        )
    return (
        f"the page {route.pattern!r} (name {route.name!r}) declares no role. Replace its @login_required "
        "with @role_required(Role.VIEWER) (or INVESTIGATOR, ADMIN) from investigations.roles; if it "
        f"must have none, add it with the reason to NO_ROLE in {__name__.replace('.', '/')}.py."
    )


def test_every_route_declares_its_role() -> None:
    missing = [how_to_declare(r) for r in ROUTES if r.name not in NO_ROLE and declared_roles(r) is None]
    assert not missing, "\n".join(missing)


@pytest.fixture
def world(ingest_bytes, personas, django_user_model, settings, tmp_path, report_written) -> World:
    run = ingest_bytes(
        genlog(
            (T0, 7, "Connect", "ann@10.0.0.1 on shop using TCP/IP"),
            (T0, 7, "Query", "DELETE FROM orders WHERE id = 1"),
        )
    )
    owner = django_user_model.objects.create_user("owner")
    event = Event.objects.get(statement_type="DELETE")
    # A case's own investigators change it (investigations.cases.can_change_case): the personas
    # are all on this one, so what the role allows is what is tested here.
    settings.REPORT_DIR = tmp_path / "reports"
    case = case_create(user=personas[Role.ADMIN].user, title="The world's case")
    case.investigators.add(*(p.user for p in personas.values()))
    evidence_pin(case=case, event=event, user=case.created_by)
    saved_filter_add(case=case, user=case.created_by, name="ann", query="user=ann")
    report_written(case, "csv", case.created_by)
    return World(event=event, run=run, owner=owner, case=case)


@pytest.fixture
def personas(django_user_model) -> dict[Role | None, Persona]:
    """A login for each persona, with a page client and a token API client."""
    from django.test import Client

    made = {}
    for role in PERSONAS:
        user = django_user_model.objects.create_user(f"as-{role.group_name if role else 'nobody'}")
        set_role(user, role)
        page = Client()
        page.force_login(user)
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
        made[role] = Persona(user, page, api)
    return made


def url_of(route: Route, world: World, user: Any = None) -> str:
    kwargs = {}
    for name in route.kwargs:
        assert name in OBJECTS, (
            f"{route.pattern!r} takes <{name}>: add to OBJECTS in {__name__.replace('.', '/')}.py how "
            "to make a real object for it (e.g. a case of the world)."
        )
        kwargs[name] = OBJECTS[name](world, user)
    return reverse(route.name, kwargs=kwargs)


def _send(client: Any, method: str, url: str) -> Any:
    extra = {"format": "json"} if isinstance(client, APIClient) else {}
    return getattr(client, method.lower())(url, **extra)


def _page_methods(route: Route, world: World, admin: Persona) -> list[str]:
    """The methods a page answers (an admin asks; a page that refuses both is an error)."""
    answered = [
        m
        for m in ("GET", "POST")
        if _send(admin.page, m, url_of(route, world, admin.user)).status_code != 405
    ]
    assert answered, f"{route.pattern}: neither GET nor POST answered"
    return answered


ROUTES_WITH_A_ROLE = [r for r in ROUTES if r.name not in NO_ROLE]
API_ROUTES = [r for r in ROUTES_WITH_A_ROLE if r.api_view is not None]


@pytest.mark.parametrize("route", ROUTES_WITH_A_ROLE, ids=[r.name or r.pattern for r in ROUTES_WITH_A_ROLE])
def test_each_role_gets_exactly_what_it_should(route: Route, world: World, personas, client) -> None:
    roles = declared_roles(route)
    assert roles is not None, how_to_declare(route)
    is_api = route.api_view is not None
    methods = list(roles) if is_api else _page_methods(route, world, personas[Role.ADMIN])
    for method in methods:
        needed = roles[method]
        url = url_of(route, world)
        anonymous = _send(APIClient() if is_api else client, method, url)
        if is_api:
            assert anonymous.status_code == 401, (method, url, anonymous.status_code)
        else:
            assert anonymous.status_code == 302, (method, url, anonymous.status_code)
            assert anonymous["Location"].startswith(reverse("login") + "?next="), anonymous["Location"]
        for role, persona in personas.items():
            url = url_of(route, world, persona.user)
            response = _send(persona.api if is_api else persona.page, method, url)
            who = role.group_name if role else "a login in no role"
            said = (method, url, who, response.status_code)
            if role is None or role < needed:
                assert response.status_code == 403, said
            else:
                assert response.status_code not in (401, 403, 404, 405) and response.status_code < 500, said
                assert not response.get("Location", "").startswith(reverse("login")), said


@pytest.mark.parametrize("route", API_ROUTES, ids=[r.name for r in API_ROUTES])
def test_a_siem_token_reaches_events_and_alerts_only(route: Route, world: World, personas) -> None:
    """Even an admin's SIEM token: reading events and alerts, and nothing else, with any method."""
    admin = personas[Role.ADMIN].user
    siem = APIClient()
    siem.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=admin, siem=True)[1]}")
    for method in declared_roles(route) or {}:
        response = _send(siem, method, url_of(route, world, admin))
        if route.name in SIEM_VIEWS and method == "GET":
            assert response.status_code == 200, (method, route.pattern, response.status_code)
        else:
            assert response.status_code == 403, (method, route.pattern, response.status_code)
            assert response.data["detail"] == SIEM_REFUSED


def test_the_declared_roles_are_the_ones_this_project_decided() -> None:
    """The map of who may do what, in one place to read (and to change on purpose)."""
    by_name = {r.name: declared_roles(r) for r in ROUTES_WITH_A_ROLE}
    admin_only = {name for name, roles in by_name.items() if roles and min(roles.values()) is Role.ADMIN}
    assert {"source-new", "source-edit", "source-ingest", "api-source-ingest"} <= admin_only
    assert by_name["source-upload"] == {"GET": Role.INVESTIGATOR, "POST": Role.INVESTIGATOR}
    assert by_name["api-sources"] == {"GET": Role.VIEWER, "POST": Role.ADMIN}
    assert by_name["api-source"] == {"GET": Role.VIEWER, "PATCH": Role.ADMIN}
    for name in ("dashboard", "events", "event-detail", "sessions", "session-detail", "tables", "sources",
                 "api-events", "api-events-export", "api-alerts", "schema", "tokens",
                 "token-revoke", "digest", "api-digest", "saved-search", "saved-search-create",
                 "saved-search-edit", "saved-search-delete"):  # fmt: skip
        assert set(by_name[name].values()) == {Role.VIEWER}, name
    assert {"audit", "audit-export", "users", "user-change"} <= admin_only
    assert {"api-events", "api-events-export", "api-alerts"} == SIEM_VIEWS
    case_routes = [name for name in by_name if name.startswith(("case", "report")) or name == "pin"]
    assert len(case_routes) >= 12
    for name in case_routes:  # cases, pins, notes and reports are the investigators'
        assert set(by_name[name].values()) == {Role.INVESTIGATOR}, name


def test_the_login_page_is_open_and_the_django_admin_is_for_staff(client, personas) -> None:
    assert client.get(reverse("login")).status_code == 200
    assert client.get("/admin/").status_code == 302
    for role in (Role.VIEWER, Role.INVESTIGATOR):
        response = personas[role].page.get("/admin/")
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
