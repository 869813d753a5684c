"""`manage.py pull_binlog --dsn mysql://repl@db1:3306 --server db1`: pull what the server wrote to its
binary log since the last pull, as a replica does, into the spool and the store (the server's
binlog-replica source, made on the first run)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.binlog_replica import spool_of
from ingest.follow import SourceBusy, ingest_source
from ingest.management.pull import add_pull_arguments
from ingest.models import IngestRun, Source
from ingest.mysql_table import password_env_problem
from ingest.pipeline import redact_dsn

PASSWORD_ENV_DEFAULT = "AUDITWEB_SOURCE_REPLICATION_PASSWORD"


class Command(BaseCommand):
    help = (
        "Pull the binary log events the server wrote since the last pull, as a replica (the account "
        "needs REPLICATION SLAVE and BINLOG MONITOR, or REPLICATION CLIENT on MySQL). Run it again "
        "(or on a schedule) to go on."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_pull_arguments(parser, "mysql://USER@HOST[:PORT]", PASSWORD_ENV_DEFAULT)

    def handle(self, *args: object, **options: object) -> None:
        dsn, server, env = str(options["dsn"]), str(options["server"]), str(options["password_env"])
        if (problem := password_env_problem(env)) is not None:
            raise CommandError(problem)
        safe = redact_dsn(dsn)
        source, _ = Source.objects.get_or_create(
            name=f"{server}: binary log pulled from {safe}",
            defaults={"kind": Source.Kind.BINLOG_REPLICA, "dsn": safe, "server": server, "password_env": env},
        )
        if source.kind != Source.Kind.BINLOG_REPLICA:
            raise CommandError(f"the source {source.name!r} is not a binlog-replica source")
        Source.objects.filter(pk=source.pk).update(password_env=env)
        started = time.monotonic()
        try:
            run = ingest_source(source.pk)
        except SourceBusy as e:
            raise CommandError(str(e)) from None
        source.refresh_from_db()
        if run is None or (run.status == IngestRun.Status.FAILED and source.last_error):
            raise CommandError(source.last_error or "nothing was pulled")
        seconds = max(time.monotonic() - started, 1e-9)
        again = run.events_seen - run.events_stored
        self.stdout.write(
            f"Pulled the binary log of {safe} into {spool_of(source)}: {run.bytes_read:,} bytes stored, "
            f"{run.events_stored:,} transactions new ({again:,} already there), "
            f"{run.problems:,} problems, {seconds:.1f} s."
        )
