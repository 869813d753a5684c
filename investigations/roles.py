"""Who may do what. Three roles, kept as Django groups, each including the ones below it:

- viewer: search and read events, sessions, tables, sources and runs;
- investigator: also cases, pins, notes, reports and uploads;
- admin: also sources, users, tokens and AuditWeb's own audit trail.

A superuser is an admin. Pages say their role with `role_required`, API views with
`role_permission`; both leave a mark (`required_role`) that the permission tests read, so a
page or endpoint without a declared role is found.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from functools import wraps
from typing import Any

from django.contrib.auth.models import Group
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from rest_framework.permissions import SAFE_METHODS, BasePermission


class Role(IntEnum):
    VIEWER = 1
    INVESTIGATOR = 2
    ADMIN = 3

    @property
    def group_name(self) -> str:
        return self.name.lower()


ROLE_BY_GROUP = {role.group_name: role for role in Role}
_CACHE_ATTR = "_auditweb_role"


def user_role(user: Any) -> Role | None:
    """The highest role the user holds, or None (anonymous, inactive, or in no role's group)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    cached = getattr(user, _CACHE_ATTR, False)
    if cached is not False:
        return cached
    if user.is_superuser:
        role: Role | None = Role.ADMIN
    else:
        names = user.groups.filter(name__in=ROLE_BY_GROUP).values_list("name", flat=True)
        role = max((ROLE_BY_GROUP[name] for name in names), default=None)
    setattr(user, _CACHE_ATTR, role)
    return role


def has_role(user: Any, role: Role) -> bool:
    held = user_role(user)
    return held is not None and held >= role


def set_role(user: Any, role: Role | None) -> None:
    """Put the user in exactly that role's group (None: in no role)."""
    user.groups.remove(*Group.objects.filter(name__in=ROLE_BY_GROUP))
    if role is not None:
        user.groups.add(Group.objects.get_or_create(name=role.group_name)[0])
    if hasattr(user, _CACHE_ATTR):
        delattr(user, _CACHE_ATTR)


def role_required(role: Role) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """For a page: anonymous visitors go to the login page, logins without the role get 403."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"This needs the {role.group_name} role.")
            return view(request, *args, **kwargs)

        checked.required_role = role  # type: ignore[attr-defined]  # read by the permissions test
        return checked

    return decorate


# What a read-only SIEM token (ApiToken.siem) may reach, by URL name: events and alerts, nothing
# else, whatever its user's role. Every API view's role permission asks, so it holds everywhere.
SIEM_VIEWS = frozenset({"api-events", "api-events-export", "api-alerts"})
SIEM_REFUSED = "A read-only SIEM token reaches only events (list and export) and alerts."


def siem_token_allows(request: Any) -> bool:
    """False when the request came with a SIEM token and asks for anything but reading events or alerts."""
    if not getattr(getattr(request, "auth", None), "siem", False):
        return True
    match = getattr(request, "resolver_match", None)
    return request.method in SAFE_METHODS and match is not None and match.url_name in SIEM_VIEWS


def role_permission(role: Role, *, write: Role | None = None) -> type[BasePermission]:
    """For an API view: `permission_classes=[role_permission(Role.INVESTIGATOR)]`.
    Anonymous requests get 401 (DRF asks for credentials), logins without the role 403.
    `write`: the role that changes need (POST, PATCH, PUT, DELETE) where reading needs less."""
    write_role = write or role

    class HasRole(BasePermission):
        message = f"This needs the {role.group_name} role."
        required_role = role
        required_write_role = write_role

        def has_permission(self, request: Any, view: Any) -> bool:
            needed = role if request.method in SAFE_METHODS else write_role
            if not has_role(request.user, needed):
                self.message = f"This needs the {needed.group_name} role."
                return False
            if not siem_token_allows(request):
                self.message = SIEM_REFUSED
                return False
            return True

    suffix = f"Write{write_role.name.title()}" if write_role != role else ""
    HasRole.__name__ = HasRole.__qualname__ = f"Has{role.name.title()}Role{suffix}"
    return HasRole


# For settings, which name classes by dotted path: drf-spectacular's schema and docs pages.
ViewerPermission = role_permission(Role.VIEWER)


class NoRoleDeclared(BasePermission):
    """DRF's default permission: an API view that does not say its role refuses everyone, so a
    forgotten declaration shows at once instead of opening the view to every login."""

    message = (
        "This API view declares no role: give it "
        "@permission_classes([role_permission(Role.VIEWER)]) (or INVESTIGATOR, ADMIN)."
    )

    def has_permission(self, request: Any, view: Any) -> bool:
        return False


def role_context(request: HttpRequest) -> dict[str, object]:
    """For templates (settings' context processors): what the viewer may do, so navigation and
    buttons show only what the role can use."""
    role = user_role(getattr(request, "user", None))
    return {
        "user_role": role,
        "may_investigate": role is not None and role >= Role.INVESTIGATOR,
        "may_administer": role is not None and role >= Role.ADMIN,
    }
