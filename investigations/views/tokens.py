"""The API tokens page: each user makes and revokes their own tokens (the key is shown once,
only a hash is kept); admins see and revoke everyone's."""

from __future__ import annotations

from datetime import datetime, time

from django import forms
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from investigations import trail
from investigations.models import ApiToken, api_token_create, api_token_revoke
from investigations.roles import Role, has_role, role_required


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. splunk or a script's name")
    expires = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Optional: the token stops working at the end of this day (your time zone)",
    )
    siem = forms.BooleanField(
        required=False,
        label="Read-only SIEM token",
        help_text="Reaches only events (list and NDJSON export) and alerts, whatever your role",
    )

    def clean_expires(self) -> datetime | None:
        day = self.cleaned_data["expires"]
        if day is None:
            return None
        end = timezone.make_aware(datetime.combine(day, time.max))
        if end <= timezone.now():
            raise forms.ValidationError("That day is over: choose a later one, or none.")
        return end


def _tokens_for(request: HttpRequest) -> QuerySet[ApiToken]:
    tokens = ApiToken.objects.select_related("user").order_by("revoked_at", "-created_at")
    if has_role(request.user, Role.ADMIN):
        return tokens  # admins see (and may revoke) everyone's
    return tokens.filter(user=request.user)


def _get_token_for_user(request: HttpRequest, token_id: int) -> ApiToken:
    """One token the user may revoke: their own, or any for an admin; else 404 (not 403: other
    people's tokens are not even said to exist)."""
    token = _tokens_for(request).filter(pk=token_id).first()
    if token is None:
        raise Http404("No such token.")
    return token


@require_http_methods(["GET", "POST"])
@role_required(Role.VIEWER)
def token_list(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None)
    new_key = None
    if request.method == "POST" and form.is_valid():
        token, new_key = api_token_create(
            user=request.user,
            name=form.cleaned_data["name"],
            expires_at=form.cleaned_data["expires"],
            siem=form.cleaned_data["siem"],
        )
        trail.record(
            request, trail.Action.TOKEN_CREATE, token=token.prefix, name=token.name, siem=token.siem,
            expires_at=token.expires_at, owner=token.user.get_username(),
        )  # fmt: skip
        form = TokenForm()
    context = {
        "form": form,
        "new_key": new_key,  # shown in this response only; never stored
        "tokens": _tokens_for(request),
        "everyone": has_role(request.user, Role.ADMIN),
        "now": timezone.now(),
    }
    response = render(request, "investigations/tokens.html", context)
    response["Cache-Control"] = "no-store"  # the key must not stay in a cache
    return response


@require_POST
@role_required(Role.VIEWER)
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = _get_token_for_user(request, token_id)
    if api_token_revoke(token):
        trail.record(
            request, trail.Action.TOKEN_REVOKE, token=token.prefix, name=token.name,
            owner=token.user.get_username(),
        )  # fmt: skip
    return HttpResponseRedirect(reverse("tokens"))
