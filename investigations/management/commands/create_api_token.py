"""`manage.py create_api_token USERNAME`: print a new REST API token (creating the user if needed)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, time, timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from investigations import trail
from investigations.models import api_token_create
from investigations.roles import ROLE_BY_GROUP, Role, set_role, user_role


def expiry(text: str) -> datetime:
    """`90d` (days from now), a date (the end of that day, UTC) or an ISO 8601 time."""
    text = text.strip()
    if text.endswith("d") and text[:-1].isascii() and text[:-1].isdigit():
        return timezone.now() + timedelta(days=int(text[:-1]))
    day = parse_date(text)
    if day is not None:
        return datetime.combine(day, time.max, tzinfo=UTC)
    try:
        moment = parse_datetime(text)
    except ValueError:
        moment = None
    if moment is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give 90d, 2027-01-31 or 2027-01-31T18:00Z")
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = "Create a REST API token for USERNAME (the user is created, without a password, if missing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="default", help="A label for the token, e.g. splunk")
        parser.add_argument(
            "--role",
            choices=list(ROLE_BY_GROUP),
            default=Role.VIEWER.group_name,
            help="The role of a user this command creates (default: viewer); an existing user keeps theirs",
        )
        parser.add_argument(
            "--expires",
            type=expiry,
            help="When it stops working: a date, a time (2027-01-31, 2027-01-31T18:00Z) or days (90d)",
        )
        parser.add_argument(
            "--siem", action="store_true", help="A read-only SIEM token: events and alerts only"
        )

    def handle(self, *args: object, **options: object) -> None:
        user, created = get_user_model().objects.get_or_create(username=options["username"])
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
            set_role(user, ROLE_BY_GROUP[str(options["role"])])
            self.stderr.write(f"Created user {user.username} (API only, no password, {options['role']}).")
        elif user_role(user) is None:
            self.stderr.write(f"{user.username} holds no role: the token will be refused everywhere.")
        token, key = api_token_create(
            user=user, name=str(options["name"]), expires_at=options["expires"], siem=bool(options["siem"])
        )
        trail.record(
            user, trail.Action.TOKEN_CREATE, token=token.prefix, name=token.name, siem=token.siem,
            expires_at=token.expires_at, owner=user.get_username(), via="manage.py create_api_token",
        )  # fmt: skip
        if token.siem:
            self.stderr.write("A read-only SIEM token: it reaches events and alerts only.")
        if token.expires_at:
            self.stderr.write(f"It expires at {token.expires_at.isoformat()}.")
        self.stderr.write("The token is shown once; AuditWeb keeps only its hash:")
        self.stdout.write(key)
