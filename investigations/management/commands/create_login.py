"""`manage.py create_login USERNAME`: a staff login with a random password, printed once."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Create a staff login with a random password and print it once; do nothing if it exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--superuser", action="store_true", help="Give it every permission")

    def handle(self, *args: object, **options: object) -> None:
        User = get_user_model()
        username = str(options["username"])
        if User.objects.filter(username=username).exists():
            self.stdout.write(f"Login {username} exists already; its password is unchanged.")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_user(
            username=username, password=password, is_staff=True, is_superuser=bool(options["superuser"])
        )
        self.stdout.write(f"Created login {username} with password {password} (shown only this once).")
