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

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from rest_framework.permissions import BasePermission


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
    from django.contrib.auth.models import Group

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

        checked.required_role = role  # type: ignore[attr-defined]
        return checked

    return decorate


def role_permission(role: Role) -> type[BasePermission]:
    """For an API view: `permission_classes=[role_permission(Role.INVESTIGATOR)]`.
    Anonymous requests get 401 (DRF asks for credentials), logins without the role 403."""

    class HasRole(BasePermission):
        message = f"This needs the {role.group_name} role."
        required_role = role

        def has_permission(self, request: Any, view: Any) -> bool:
            return has_role(request.user, role)

    HasRole.__name__ = HasRole.__qualname__ = f"Has{role.name.title()}Role"
    return HasRole
