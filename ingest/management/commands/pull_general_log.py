"""`manage.py pull_general_log --dsn mysql://reader@db1:3306 --server db1`: pull new rows of a live
server's mysql.general_log (log_output=TABLE) into the event store, from where the last pull
of that source stopped."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandParser

from ingest.management.pull import add_pull_arguments, connect_or_fail
from ingest.mysql_table import PASSWORD_ENV_DEFAULT, connect
from ingest.pipeline import ingest_table, table_source


class Command(BaseCommand):
    help = (
        "Pull the rows of mysql.general_log added since the last pull of this server. The account "
        "needs only SELECT on mysql.general_log. Run it again (or on a schedule) to go on."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_pull_arguments(
            parser,
            "mysql://USER@HOST[:PORT] or mysql://USER@localhost?unix_socket=PATH",
            PASSWORD_ENV_DEFAULT,
        )

    def handle(self, *args: object, **options: object) -> None:
        dsn, server = str(options["dsn"]), str(options["server"])
        conn = connect_or_fail(connect, dsn, str(options["password_env"]))
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
