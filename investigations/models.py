"""Investigation-side records: API tokens (cases and reports come later)."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX_LEN = 8


def hash_token(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A REST API token. Only its SHA-256 is stored; the key is shown once, when made."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="default")
    prefix = models.CharField(max_length=TOKEN_PREFIX_LEN, help_text="First characters, to recognise a token")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_active(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


def api_token_create(*, user: models.Model, name: str = "default") -> tuple[ApiToken, str]:
    """Make a token for `user`; returns it with the key, which is not stored anywhere."""
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=key[:TOKEN_PREFIX_LEN], key_hash=hash_token(key)
    )
    return token, key


class TableSeen(models.Model):
    """A table name that events mention (`Event.tables`), with how often and when: the Tables page.

    Listing the names of millions of events takes a pass over all of them, so the list is kept
    here and rebuilt in the background (`investigations.tables.tables_seen_refresh`); names in
    events stored since the last rebuild are added on the fly by the page."""

    name = models.CharField(max_length=400, unique=True)
    events = models.BigIntegerField()
    destructive = models.BigIntegerField(help_text="Events that could remove or overwrite its data")
    first_at = models.DateTimeField(null=True)
    last_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return self.name


class TableCatalogue(models.Model):
    """The one row saying how far TableSeen is: events up to `upto_id` are counted in it."""

    upto_id = models.BigIntegerField(default=0)
    refreshed_at = models.DateTimeField(null=True)
    # A rebuild is claimed by one conditional UPDATE of this field (only one runs at a time).
    refreshing_since = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"tables seen up to event {self.upto_id}"
