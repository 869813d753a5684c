"""AuditWeb's own audit trail: who logged in (or failed to), searched, looked at which evidence,
exported or downloaded what, and changed which source or token.

Call `record(request, Action.X, **details)` where the thing happens. Rows are only ever added:
a trigger in migration 0007 refuses every UPDATE and DELETE of the table, so not even a
bug or an admin with a shell can quietly rewrite who did what.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import validate_ipv46_address
from django.db import models
from django.utils import timezone

from ingest.textsafe import storable

MAX_TEXT = 1000  # a detail's text is cut here: the trail must stay small whatever was typed


class Action(models.TextChoices):
    LOGIN = "login", "Logged in"
    LOGIN_FAILED = "login_failed", "Login failed"
    LOCKED_OUT = "locked_out", "Login refused: locked out"
    LOGOUT = "logout", "Logged out"
    PASSWORD_CHANGE = "password_change", "Changed their password"
    SEARCH = "search", "Searched events"
    SEARCH_SAVE = "search_save", "Saved, changed or deleted a search"
    EVENT_VIEW = "event_view", "Viewed an event"
    RAW_REVEAL = "raw_reveal", "Revealed an event's raw bytes"
    RAW_DOWNLOAD = "raw_download", "Downloaded an event's raw bytes"
    SESSION_VIEW = "session_view", "Viewed a session"
    EXPORT = "export", "Exported events"
    UPLOAD = "upload", "Uploaded a log file"
    SOURCE_CREATE = "source_create", "Added a source"
    SOURCE_EDIT = "source_edit", "Changed a source"
    SOURCE_INGEST = "source_ingest", "Started an ingest"
    TOKEN_CREATE = "token_create", "Created an API token"
    TOKEN_REVOKE = "token_revoke", "Revoked an API token"
    USER_CREATE = "user_create", "Made a login"
    USER_CHANGE = "user_change", "Changed a login's role or access"
    SOURCE_DELETE = "source_delete", "Deleted a source"
    ADMIN_CHANGE = "admin_change", "Changed something in the Django admin"
    CASE_CREATE = "case_create", "Opened a case"
    CASE_CHANGE = "case_change", "Changed a case"
    REPORT_CREATE = "report_create", "Generated a report"
    REPORT_DOWNLOAD = "report_download", "Downloaded a report"
    AUDIT_EXPORT = "audit_export", "Exported the audit trail"


class AuditRecord(models.Model):
    """One thing a person (or a token) did in AuditWeb. Append-only (see the module)."""

    at = models.DateTimeField(default=timezone.now)
    # No foreign key: a deleted login's records stay, under the name it had.
    user_id = models.BigIntegerField(null=True, blank=True)
    username = models.CharField(max_length=150, blank=True, help_text="As typed, for a failed login")
    # Not `choices`: a new kind of action needs no migration. Action names the known ones.
    action = models.CharField(max_length=40)
    ip = models.GenericIPAddressField(null=True, blank=True)
    method = models.CharField(max_length=10, blank=True)
    path = models.CharField(max_length=MAX_TEXT, blank=True)
    token = models.CharField(max_length=16, blank=True, help_text="Prefix of the API token used, if any")
    details = models.JSONField(default=dict, encoder=DjangoJSONEncoder)

    class Meta:
        app_label = "investigations"
        indexes = [
            # The admin page's filters, each newest first (the page is ordered by id).
            models.Index(fields=["username", "-id"], name="audit_by_user"),
            models.Index(fields=["action", "-id"], name="audit_by_action"),
            # Time ranges over a table that only grows in time order.
            models.Index(fields=["at"], name="audit_at"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username or '-'} {self.action}"

    @property
    def action_label(self) -> str:
        return ACTION_LABELS.get(self.action, self.action)

    @property
    def detail_pairs(self) -> list[tuple[str, str]]:
        """The details as `key=value` pairs for a page: nested ones as `filters.user`, lists
        joined, nothing left out."""
        return list(_flat(self.details))


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flat(inner, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        yield prefix, ", ".join(str(v) for v in value)
    else:
        yield prefix, "" if value is None else str(value)


ACTION_LABELS = dict(Action.choices)


def client_ip(request: Any) -> str | None:
    """The client's address: REMOTE_ADDR, or behind a proxy we trust (TRUST_X_FORWARDED_FOR), the
    address that proxy saw, which it appended last to X-Forwarded-For (earlier ones are the
    client's own say and can be forged)."""
    if settings.TRUST_X_FORWARDED_FOR:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded.strip():
            return _ip_or_none(forwarded.split(",")[-1].strip())
    return _ip_or_none(request.META.get("REMOTE_ADDR", ""))


def _ip_or_none(text: str) -> str | None:
    try:
        validate_ipv46_address(text)
    except ValidationError:
        return None
    return text


def _bounded(value: Any) -> Any:
    """Details as JSON of bounded size: long text cut, containers walked."""
    if isinstance(value, str):  # NUL and lone surrogates written visibly: jsonb refuses them
        return storable(value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "…")
    if isinstance(value, dict):
        return {storable(str(k)[:100]): _bounded(v) for k, v in list(value.items())[:100]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_bounded(v) for v in list(value)[:100]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _bounded(str(value))


def record(who: Any, action: str, *, username: str | None = None, **details: Any) -> AuditRecord:
    """Add one record. `who` is the request (user, client address, path and API token are taken
    from it) or, outside a request (a task, a command), the user. `username`: the name typed,
    where no user is logged in (a failed login). `details`: what was done, as JSON."""
    request = who if hasattr(who, "META") else None
    user = getattr(request, "user", None) if request is not None else who
    authenticated = user is not None and getattr(user, "is_authenticated", False)
    auth = getattr(request, "auth", None) if request is not None else None
    return AuditRecord.objects.create(
        user_id=user.pk if authenticated else None,
        username=storable((user.get_username() if authenticated else username or "")[:150]),
        action=str(action),
        ip=client_ip(request) if request is not None else None,
        method=(request.method or "")[:10] if request is not None else "",
        path=request.get_full_path()[:MAX_TEXT] if request is not None else "",
        token=getattr(auth, "prefix", "")[:16],
        details=_bounded(details),
    )


def filters_of(params: Any) -> dict[str, Any]:
    """The filters a search used (its non-empty parameters), for a search's record."""
    skip = {"cursor", "page", "page_size", "csrfmiddlewaretoken"}
    return {key: (values if len(values) > 1 else values[0]) for key, values in params.lists()
            if key not in skip and any(v != "" for v in values)}  # fmt: skip


def _on_login(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if request is not None:
        record(request, Action.LOGIN)


def _on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if request is not None and user is not None:
        record(request, Action.LOGOUT)


def _on_login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    """A wrong password (or a login refused while locked out): the name tried and from where."""
    if request is not None:
        record(request, Action.LOGIN_FAILED, username=str(credentials.get("username", "")))


def _on_admin_change(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    """A change made through the Django admin (/admin/, staff only): the admin writes a LogEntry
    for each, and that entry is recorded here with who made it (the admin gives no request)."""
    if not created:
        return
    user = get_user_model().objects.filter(pk=instance.user_id).first()
    verb = {1: "added", 2: "changed", 3: "deleted"}.get(instance.action_flag, "changed")
    model = instance.content_type.model if instance.content_type_id else ""
    action = ADMIN_ACTIONS.get((model, verb), Action.ADMIN_CHANGE)
    record(
        user, action, via="django admin", model=model, object=instance.object_id,
        name=instance.object_repr, what=verb, change=instance.get_change_message(),
    )  # fmt: skip


# What a change in the Django admin is, where the trail has a name for it.
ADMIN_ACTIONS = {
    ("source", "added"): Action.SOURCE_CREATE,
    ("source", "changed"): Action.SOURCE_EDIT,
    ("source", "deleted"): Action.SOURCE_DELETE,
    ("user", "added"): Action.USER_CREATE,
    ("user", "changed"): Action.USER_CHANGE,
}


def connect_signals() -> None:
    # (this module is loaded with the models, before the admin's LogEntry exists: imported when ready)
    from django.contrib.admin.models import LogEntry
    from django.contrib.auth import signals
    from django.db.models.signals import post_save

    post_save.connect(_on_admin_change, sender=LogEntry, dispatch_uid="audit-django-admin")

    signals.user_logged_in.connect(_on_login, dispatch_uid="audit-login")
    signals.user_logged_out.connect(_on_logout, dispatch_uid="audit-logout")
    signals.user_login_failed.connect(_on_login_failed, dispatch_uid="audit-login-failed")


def _on_locked_out(sender: Any, request: Any, username: str | None = None, **kwargs: Any) -> None:
    if request is not None:
        record(request, Action.LOCKED_OUT, username=username or "")


def connect_throttling_signals() -> None:
    # (axes' signals import its models: imported once the apps are ready, as connect_signals)
    from axes.signals import user_locked_out

    user_locked_out.connect(_on_locked_out, dispatch_uid="audit-locked-out")
