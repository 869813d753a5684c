"""The users page, for admins: every login with its role, made here (the password shown once)
and given a role or switched off. Each change is in the audit trail."""

from __future__ import annotations

import secrets

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model, update_session_auth_hash
from django.contrib.auth.forms import PasswordChangeForm
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from investigations import trail
from investigations.roles import ROLE_BY_GROUP, Role, role_required, set_role, user_role

NO_ROLE = ""
ROLE_CHOICES = [
    (NO_ROLE, "no role (may not log in to anything)"),
    *((r.group_name, r.group_name) for r in Role),
]


class NewUserForm(forms.Form):
    username = forms.RegexField(
        regex=r"^[\w.@+-]{1,150}$",
        help_text="Letters, digits and @ . + - _",
        error_messages={"invalid": "Letters, digits and @ . + - _ only."},
    )
    role = forms.ChoiceField(choices=ROLE_CHOICES[1:], initial=Role.VIEWER.group_name)

    def clean_username(self) -> str:
        name = self.cleaned_data["username"]
        if get_user_model().objects.filter(username__iexact=name).exists():
            raise forms.ValidationError("That name is taken.")
        return str(name)


class UserChangeForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES, required=False)
    active = forms.BooleanField(required=False)


@require_http_methods(["GET", "POST"])
@role_required(Role.ADMIN)
def user_list(request: HttpRequest) -> HttpResponse:
    form = NewUserForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        password = secrets.token_urlsafe(12)
        user = get_user_model().objects.create_user(username=form.cleaned_data["username"], password=password)
        role = ROLE_BY_GROUP[form.cleaned_data["role"]]
        set_role(user, role)
        trail.record(request, trail.Action.USER_CREATE, user=user.get_username(), role=role.group_name)
        created = {"username": user.get_username(), "password": password}  # shown in this response only
        form = NewUserForm()
    active_tokens = Count(
        "api_tokens",
        filter=Q(api_tokens__revoked_at__isnull=True)
        & (Q(api_tokens__expires_at__isnull=True) | Q(api_tokens__expires_at__gt=timezone.now())),
    )
    users = get_user_model().objects.annotate(active_tokens=active_tokens).order_by("username")
    rows = [(u, user_role(u)) for u in users.prefetch_related("groups")]
    context = {"form": form, "rows": rows, "created": created, "role_choices": ROLE_CHOICES}
    response = render(request, "investigations/user_list.html", context)
    response["Cache-Control"] = "no-store"  # a new password must not stay in a cache
    return response


@require_POST
@role_required(Role.ADMIN)
def user_change(request: HttpRequest, user_id: int) -> HttpResponse:
    """A role and whether the login works; not one's own (an admin cannot lock themselves out),
    not a superuser's (those are managed with manage.py or the Django admin)."""
    user = get_object_or_404(get_user_model(), pk=user_id)
    form = UserChangeForm(request.POST)
    if user.pk == request.user.pk or user.is_superuser:
        messages.error(request, f"{user.get_username()}: change your own login or a superuser elsewhere.")
    elif not form.is_valid():
        messages.error(request, f"{user.get_username()}: {form.errors.as_text()}")
    else:
        name = form.cleaned_data["role"]
        role = ROLE_BY_GROUP[name] if name else None
        before = user_role(user)
        set_role(user, role)
        if user.is_active != form.cleaned_data["active"]:
            user.is_active = form.cleaned_data["active"]
            user.save(update_fields=["is_active"])
        trail.record(
            request, trail.Action.USER_CHANGE, user=user.get_username(),
            role_before=before.group_name if before else None, role=name or None, active=user.is_active,
        )  # fmt: skip
        messages.success(request, f"{user.get_username()}: saved.")
    return HttpResponseRedirect(reverse("users"))


@require_http_methods(["GET", "POST"])
@role_required(Role.VIEWER)
def password_change(request: HttpRequest) -> HttpResponse:
    """One's own password, changed by giving the old one (Django's PasswordChangeForm, with the
    password validators of settings). The session stays logged in; others of the same login end.
    Recorded in the audit trail (without either password)."""
    form = PasswordChangeForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        update_session_auth_hash(request, user)
        trail.record(request, trail.Action.PASSWORD_CHANGE)
        messages.success(request, "Your password is changed. Your other sessions are logged out.")
        return HttpResponseRedirect(reverse("password-change"))
    return render(request, "registration/password_change_form.html", {"form": form})
