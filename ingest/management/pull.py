"""What the `pull_*` commands share: their options and connecting with the password from the
environment (never from the command line, where `ps` would show it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ingest.mysql_table import PASSWORD_ENV_PREFIX, source_password
from ingest.pipeline import redact_dsn


def add_pull_arguments(parser: CommandParser, dsn_help: str, password_env_default: str) -> None:
    """--dsn, --server and --password-env."""
    parser.add_argument("--dsn", required=True, help=f"{dsn_help} (no password here)")
    parser.add_argument("--server", required=True, help="Label of the database server")
    parser.add_argument(
        "--password-env",
        default=password_env_default,
        help=f"Environment variable holding the password, named {PASSWORD_ENV_PREFIX}... "
        f"(default: {password_env_default})",
    )


def connect_or_fail(connect: Callable[[str, str | None], Any], dsn: str, password_env: str) -> Any:
    """`connect(dsn, password)`, or a CommandError that says why and shows no password."""
    try:
        return connect(dsn, source_password(password_env, os.environ))
    except ValueError as e:
        raise CommandError(str(e)) from None
    except Exception as e:  # the driver's own errors: refused, unknown host or service, bad password
        raise CommandError(f"cannot connect to {redact_dsn(dsn)}: {e}") from None
