"""The users page: admins make logins (the password shown once), give roles and switch logins
off; never their own or a superuser's. Each change is in the audit trail."""

from __future__ import annotations

import re

import pytest

from investigations.roles import Role, user_role
from investigations.trail import Action, AuditRecord

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


def test_an_admin_makes_a_login_whose_password_is_shown_once(admin_client, client, django_user_model) -> None:
    made = admin_client.post("/users/", {"username": "nina", "role": "investigator"})
    password = re.search(r'id="new-password" value="([^"]+)"', made.content.decode()).group(1)
    nina = django_user_model.objects.get(username="nina")
    assert user_role(nina) is Role.INVESTIGATOR and nina.check_password(password)
    assert password not in admin_client.get("/users/").content.decode()
    assert AuditRecord.objects.get(action=Action.USER_CREATE).details == {
        "user": "nina",
        "role": "investigator",
    }
    taken = admin_client.post("/users/", {"username": "NINA", "role": "viewer"})
    assert "That name is taken." in taken.content.decode()


def test_an_admin_changes_a_role_and_switches_a_login_off(
    admin_client, investigator, django_user_model
) -> None:
    admin_client.post(f"/users/{investigator.pk}/", {"role": "viewer", "active": "on"})
    ivy = django_user_model.objects.get(pk=investigator.pk)
    assert user_role(ivy) is Role.VIEWER and ivy.is_active
    admin_client.post(f"/users/{investigator.pk}/", {"role": ""})
    ivy = django_user_model.objects.get(pk=investigator.pk)
    assert user_role(ivy) is None and not ivy.is_active
    changes = AuditRecord.objects.filter(action=Action.USER_CHANGE).order_by("id")
    assert [(c.details["role_before"], c.details["role"], c.details["active"]) for c in changes] == [
        ("investigator", "viewer", True), ("viewer", None, False)
    ]  # fmt: skip


def test_an_admin_cannot_change_their_own_login_or_a_superuser(
    admin_client, admin_user, django_user_model
) -> None:
    root = django_user_model.objects.create_superuser("root")
    for target in (admin_user, root):
        response = admin_client.post(f"/users/{target.pk}/", {"role": "viewer"}, follow=True)
        assert "change your own login or a superuser elsewhere" in response.content.decode()
    assert user_role(django_user_model.objects.get(pk=admin_user.pk)) is Role.ADMIN
    assert not AuditRecord.objects.filter(action=Action.USER_CHANGE).exists()
