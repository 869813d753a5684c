"""`manage.py create_api_token USERNAME`: print a new REST API token (creating the user if needed)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from investigations.models import api_token_create
from investigations.roles import ROLE_BY_GROUP, Role, set_role, user_role


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

    def handle(self, *args: object, **options: object) -> None:
        user, created = get_user_model().objects.get_or_create(username=options["username"])
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
            set_role(user, ROLE_BY_GROUP[str(options["role"])])
            self.stderr.write(f"Created user {user.username} (API only, no password, {options['role']}).")
        elif user_role(user) is None:
            self.stderr.write(f"{user.username} holds no role: the token will be refused everywhere.")
        _, key = api_token_create(user=user, name=str(options["name"]))
        self.stderr.write("The token is shown once; AuditWeb keeps only its hash:")
        self.stdout.write(key)
