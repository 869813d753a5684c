"""`manage.py create_login USERNAME --role viewer|investigator|admin`: a login with a random
password, printed once."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from investigations.roles import ROLE_BY_GROUP, Role, set_role


class Command(BaseCommand):
    help = "Create a login with a role and a random password, printed once; do nothing if it exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--role",
            choices=list(ROLE_BY_GROUP),
            default=Role.INVESTIGATOR.group_name,
            help="viewer: search and read; investigator: + cases, pins, reports, uploads; "
            "admin: + sources, users, tokens, the audit trail (default: investigator)",
        )
        parser.add_argument(
            "--superuser", action="store_true", help="Every permission, the Django admin too (an admin)"
        )

    def handle(self, *args: object, **options: object) -> None:
        User = get_user_model()
        username = str(options["username"])
        if User.objects.filter(username=username).exists():
            self.stdout.write(f"Login {username} exists already; its password and role are unchanged.")
            return
        superuser = bool(options["superuser"])
        role = Role.ADMIN if superuser else ROLE_BY_GROUP[str(options["role"])]
        password = secrets.token_urlsafe(12)
        # Staff (the Django admin at /admin/) only for admins: it lists users and sources.
        user = User.objects.create_user(
            username=username, password=password, is_staff=role is Role.ADMIN, is_superuser=superuser
        )
        set_role(user, role)
        self.stdout.write(
            f"Created login {username} ({role.group_name}) with password {password} (shown only this once)."
        )
