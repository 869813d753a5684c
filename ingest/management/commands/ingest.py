"""`manage.py ingest PATH...`: read log files (plain or .gz) into the event store.

Binary logs (ingest.binlog_store) may come in the same command as the same server's other
logs, in any order: once every file is stored, the server's row statements are joined to its
statements (ingest.binlog_join), whichever came first."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from ingest.models import BinlogFile, BinlogTransaction, IngestRun
from ingest.normalize import GapFinder, SessionTracker
from ingest.parsers import AUTO, NAMES
from ingest.parsers.detect import UnknownFormat
from ingest.parsers.pgaudit_stderr import NAME as PGAUDIT_STDERR
from ingest.parsers.pgaudit_stderr import prefix_problem
from ingest.pipeline import ingest_file, source_for_path


class Command(BaseCommand):
    help = (
        "Ingest MySQL/MariaDB (binary logs among them) and PostgreSQL pgAudit log files (plain or "
        ".gz). Give rotated files oldest first: connections that span two files keep their user. "
        "Ingesting a file again stores nothing new."
    )
    # A data command run often (cron, scripts): Django's system checks of the whole project
    # (models, URLs, templates) take a fifth of a second each time; `manage.py check` runs them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
        parser.add_argument("--format", default=AUTO, choices=[AUTO, *NAMES])
        parser.add_argument(
            "--server", default="default", help="Label of the database server (default: default)"
        )
        parser.add_argument(
            "--timezone", default="UTC", help="Zone of timestamps the log prints without one (default: UTC)"
        )
        parser.add_argument(
            "--log-line-prefix",
            default="",
            help=(
                "A PostgreSQL stderr log's log_line_prefix, exactly as postgresql.conf sets it (it must"
                " name the time, %%u, %%d and %%c); implies --format pgaudit-stderr"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        paths: list[Path] = options["paths"]
        server = str(options["server"])
        fmt = str(options["format"])
        try:
            tz = ZoneInfo(str(options["timezone"]))
        except (ZoneInfoNotFoundError, ValueError):
            raise CommandError(
                f"Unknown time zone {options['timezone']!r}; use a name like Europe/Berlin."
            ) from None
        prefix = str(options["log_line_prefix"])
        if prefix:
            problem = prefix_problem(prefix)
            if problem is not None:
                raise CommandError(problem)
            if fmt == AUTO:
                fmt = PGAUDIT_STDERR
            elif fmt != PGAUDIT_STDERR:
                raise CommandError(f"--log-line-prefix is for --format {PGAUDIT_STDERR} only, not {fmt}")
        for path in paths:
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
        tracker = SessionTracker(server, tz)  # shared: sessions continue from one file into the next
        gap_finder = GapFinder()  # and so does what the log shows about recording
        totals = {"stored": 0, "seen": 0, "problems": 0, "transactions": 0}
        started = time.monotonic()
        for path in paths:
            source = source_for_path(path, server=server, fmt=fmt, tz=tz.key)
            if prefix and source.log_line_prefix != prefix:  # the server's, as it stands now
                source.log_line_prefix = prefix
                source.save(update_fields=["log_line_prefix"])
            bar = tqdm(
                total=path.stat().st_size,
                unit="B",
                unit_scale=True,
                desc=path.name[:30],
                disable=not sys.stderr.isatty(),
                leave=False,
            )

            def show(run: IngestRun, bar: tqdm = bar) -> None:
                bar.update(run.bytes_read - bar.n)
                bar.set_postfix(events=run.events_stored, refresh=False)

            try:
                run = ingest_file(
                    path, source=source, fmt=fmt, tracker=tracker, gap_finder=gap_finder, progress=show
                )
            except UnknownFormat as e:
                raise CommandError(f"{path}: {e}") from None
            except ValueError as e:
                raise CommandError(f"{path}: {e}") from None
            finally:
                bar.close()
            totals["problems"] += run.problems
            if BinlogFile.objects.filter(source_file_id=run.source_file_id).exists():
                totals["transactions"] += run.events_stored  # a binlog run counts transactions
                self.stdout.write(
                    f"{path}: {run.events_seen} binlog transactions read, {run.events_stored} new, "
                    f"{run.problems} problems (run {run.pk})"
                )
                continue
            totals["stored"] += run.events_stored
            totals["seen"] += run.events_seen
            self.stdout.write(
                f"{path}: {run.events_seen} events read, {run.events_stored} new, "
                f"{run.problems} problems (run {run.pk})"
            )
        joined = 0
        # After both sides are stored; nothing to do without binlogs (join_binlogs asks the same first).
        if BinlogTransaction.objects.filter(server=server).exists():
            from ingest.binlog_join import join_binlogs  # here: without binlogs, no start-up cost

            joined = join_binlogs(server)
        if joined:
            self.stdout.write(f"{server}: {joined} binlog row statements joined to their statements")
        seconds = max(time.monotonic() - started, 1e-9)
        self.stdout.write(
            self.style.SUCCESS(
                f"Ingested {len(paths)} file(s): {totals['stored']} events stored "
                f"({totals['seen'] - totals['stored']} already there), {totals['problems']} problems, "
                f"{totals['seen'] / seconds:,.0f} events/s"
                + (
                    f", {totals['transactions']} binlog transactions stored."
                    if totals["transactions"]
                    else "."
                )
            )
        )
