"""`manage.py pull_general_log --dsn mysql://reader@db1:3306 --server db1`: pull new rows of a live
server's mysql.general_log (log_output=TABLE) into the event store, from where the last pull
of that source stopped."""

from __future__ import annotations

import os
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.mysql_table import PASSWORD_ENV_DEFAULT, PASSWORD_ENV_PREFIX, connect, source_password
from ingest.pipeline import ingest_table, table_source


class Command(BaseCommand):
    help = (
        "Pull the rows of mysql.general_log added since the last pull of this server. The account "
        "needs only SELECT on mysql.general_log. Run it again (or on a schedule) to go on."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dsn",
            required=True,
            help="mysql://USER@HOST[:PORT] or mysql://USER@localhost?unix_socket=PATH (no password here)",
        )
        parser.add_argument("--server", required=True, help="Label of the database server")
        parser.add_argument(
            "--password-env",
            default=PASSWORD_ENV_DEFAULT,
            help=f"Environment variable holding the password, named {PASSWORD_ENV_PREFIX}... "
            f"(default: {PASSWORD_ENV_DEFAULT})",
        )

    def handle(self, *args: object, **options: object) -> None:
        dsn, server = str(options["dsn"]), str(options["server"])
        try:
            password = source_password(str(options["password_env"]), os.environ)
            conn = connect(dsn, password)
        except ValueError as e:
            raise CommandError(str(e)) from None
        except Exception as e:  # the driver's own errors: refused, unknown host, bad password
            raise CommandError(f"cannot connect to {dsn}: {e}") from None
        source = table_source(dsn=dsn, server=server)
        started = time.monotonic()
        try:
            run = ingest_table(source, conn)
        finally:
            conn.close()
        seconds = max(time.monotonic() - started, 1e-9)
        self.stdout.write(
            f"Pulled {run.bytes_read:,} rows of mysql.general_log from {source.dsn}: "
            f"{run.events_stored:,} events stored ({run.events_seen - run.events_stored:,} already there), "
            f"{run.problems:,} problems, {run.bytes_read / seconds:,.0f} rows/s."
        )
