"""`manage.py pull_oracle_audit --dsn oracle://auditweb@db1:1521/ORCLPDB1 --server db1`: pull new rows
of an Oracle database's UNIFIED_AUDIT_TRAIL (python-oracledb, thin mode) into the event store, from
where the last pull of that source stopped (its overlap window re-read, nothing stored twice)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandParser

from ingest.management.pull import add_pull_arguments, connect_or_fail
from ingest.models import Source
from ingest.oracle_table import connect
from ingest.pipeline import ingest_oracle_table, redact_dsn

PASSWORD_ENV_ORACLE = "AUDITWEB_SOURCE_ORACLE_PASSWORD"


class Command(BaseCommand):
    help = (
        "Pull the rows of UNIFIED_AUDIT_TRAIL added since the last pull of this server. The account "
        "needs only the AUDIT_VIEWER role (GRANT AUDIT_VIEWER TO auditweb). Run it again (or on a "
        "schedule) to go on."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_pull_arguments(parser, "oracle://USER@HOST[:PORT]/SERVICE_NAME[?tls=verify]", PASSWORD_ENV_ORACLE)

    def handle(self, *args: object, **options: object) -> None:
        dsn, server = str(options["dsn"]), str(options["server"])
        conn = connect_or_fail(connect, dsn, str(options["password_env"]))
        safe = redact_dsn(dsn)
        source, _ = Source.objects.get_or_create(
            name=f"{server}: UNIFIED_AUDIT_TRAIL at {safe}",
            defaults={"kind": Source.Kind.ORACLE_TABLE, "dsn": safe, "server": server, "timezone": "UTC"},
        )
        started = time.monotonic()
        try:
            run = ingest_oracle_table(source, conn)
        finally:
            conn.close()
        seconds = max(time.monotonic() - started, 1e-9)
        self.stdout.write(
            f"Pulled {run.bytes_read:,} rows of UNIFIED_AUDIT_TRAIL from {source.dsn}: "
            f"{run.events_stored:,} events stored ({run.events_seen - run.events_stored:,} already there), "
            f"{run.problems:,} problems, {run.bytes_read / seconds:,.0f} rows/s."
        )
