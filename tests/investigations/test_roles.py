"""The three roles: groups made by a migration, each including the ones below it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.http import HttpResponse
from django.test import RequestFactory

from investigations.roles import Role, has_role, role_permission, role_required, set_role, user_role

pytestmark = pytest.mark.django_db


def test_the_migration_makes_one_group_per_role() -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= {"viewer", "investigator", "admin"}


@pytest.mark.parametrize("held", [None, *Role])
def test_a_role_includes_the_ones_below_it(django_user_model, held) -> None:
    user = django_user_model.objects.create_user("someone")
    set_role(user, held)
    user = django_user_model.objects.get(pk=user.pk)
    assert user_role(user) == held
    for role in Role:
        assert has_role(user, role) == (held is not None and held >= role)


def test_set_role_replaces_the_role_held_before(django_user_model) -> None:
    user = django_user_model.objects.create_user("someone")
    set_role(user, Role.ADMIN)
    set_role(user, Role.VIEWER)
    assert list(user.groups.values_list("name", flat=True)) == ["viewer"]
    assert user_role(user) is Role.VIEWER


def test_a_superuser_is_an_admin_and_an_inactive_login_is_nobody(django_user_model) -> None:
    boss = django_user_model.objects.create_superuser("boss")
    gone = django_user_model.objects.create_user("gone", is_active=False)
    set_role(gone, Role.ADMIN)
    assert user_role(boss) is Role.ADMIN
    assert user_role(gone) is None


def test_a_page_sends_anonymous_visitors_to_log_in_and_refuses_a_lesser_role(django_user_model) -> None:
    from django.contrib.auth.models import AnonymousUser
    from django.core.exceptions import PermissionDenied

    @role_required(Role.INVESTIGATOR)
    def page(request):
        return HttpResponse("ok")

    assert page.required_role is Role.INVESTIGATOR
    request = RequestFactory().get("/cases/?x=1")
    request.user = AnonymousUser()
    response = page(request)
    assert response.status_code == 302 and "next=/cases/%3Fx%3D1" in response["Location"]

    viewer = django_user_model.objects.create_user("vic")
    set_role(viewer, Role.VIEWER)
    request.user = viewer
    with pytest.raises(PermissionDenied):
        page(request)

    investigator = django_user_model.objects.create_user("ivy2")
    set_role(investigator, Role.INVESTIGATOR)
    request.user = investigator
    assert page(request).content == b"ok"


def test_an_api_permission_checks_the_role(django_user_model) -> None:
    permission = role_permission(Role.ADMIN)()
    request = RequestFactory().get("/api/v1/sources/")
    request.user = django_user_model.objects.create_user("ivy3")
    set_role(request.user, Role.INVESTIGATOR)
    assert not permission.has_permission(request, None)
    request.user = django_user_model.objects.create_superuser("root")
    assert permission.has_permission(request, None)


def test_create_login_gives_the_role_asked_for_and_staff_only_to_admins(django_user_model) -> None:
    from io import StringIO

    from django.core.management import call_command

    for name, role in (("v", "viewer"), ("i", "investigator"), ("a", "admin")):
        out = StringIO()
        call_command("create_login", name, "--role", role, stdout=out)
        assert f"Created login {name} ({role}) with password " in out.getvalue()
        user = django_user_model.objects.get(username=name)
        assert user_role(user) is Role[role.upper()] and user.is_staff == (role == "admin")
        password = out.getvalue().split(" with password ")[1].split(" ")[0]
        assert user.check_password(password)


def test_create_login_reset_password_gives_a_new_password_and_keeps_the_role(django_user_model) -> None:
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    from investigations.trail import AuditRecord

    call_command("create_login", "admin", "--superuser", stdout=StringIO())
    out = StringIO()
    call_command("create_login", "admin", "--reset-password", stdout=out)
    assert out.getvalue().startswith("New password of admin: ")
    password = out.getvalue().split(": ")[1].split(" ")[0]
    user = django_user_model.objects.get(username="admin")
    assert user.check_password(password) and user.is_superuser and user_role(user) is Role.ADMIN
    record = AuditRecord.objects.get(action="user_change")
    assert record.details["user"] == "admin" and "password reset" in record.details["what"]
    with pytest.raises(CommandError, match="no login nobody"):
        call_command("create_login", "nobody", "--reset-password", stdout=StringIO())
    assert not django_user_model.objects.filter(username="nobody").exists()


def test_create_api_token_makes_a_new_user_a_viewer_unless_told(django_user_model) -> None:
    from io import StringIO

    from django.core.management import call_command

    call_command("create_api_token", "siem", stdout=StringIO(), stderr=StringIO())
    call_command("create_api_token", "robot", "--role", "admin", stdout=StringIO(), stderr=StringIO())
    assert user_role(django_user_model.objects.get(username="siem")) is Role.VIEWER
    assert user_role(django_user_model.objects.get(username="robot")) is Role.ADMIN
