"""`manage.py create_login USERNAME --role viewer|investigator|admin`: a login with a random
password, printed once; `--reset-password` gives an existing login a new one (a forgotten demo
password, a locked-out admin)."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from investigations import trail
from investigations.roles import ROLE_BY_GROUP, Role, set_role


class Command(BaseCommand):
    help = (
        "Create a login with a role and a random password, printed once; do nothing if it exists "
        "(--reset-password: give it a new random password instead)."
    )

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
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="The login exists: give it a new random password, printed once (role unchanged)",
        )

    def handle(self, *args: object, **options: object) -> None:
        User = get_user_model()
        username = str(options["username"])
        if options["reset_password"]:
            self._reset(username)
            return
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

    def _reset(self, username: str) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"There is no login {username}; create it without --reset-password.")
        password = secrets.token_urlsafe(12)
        user.set_password(password)
        user.save(update_fields=["password"])
        # Who ran it is the machine's user, not a login: the record names the login changed.
        trail.record(None, trail.Action.USER_CHANGE, user=username, what="password reset by manage.py")
        self.stdout.write(f"New password of {username}: {password} (shown only this once).")
