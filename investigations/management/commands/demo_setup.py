"""`manage.py demo_setup --followed DIR`: what `./dev demo` adds after ingesting the sample logs.

Two followed file sources (one a writer keeps feeding, one that delivered once and went silent)
and a case about the culprit of the rotated log, with pins and a PDF report, made through the
functions the Sources page and the case pages call, so the demo shows what a user would get.
Running it again changes nothing that exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from ingest.models import Event, Source
from ingest.parsers import general_log
from ingest.sources import SourceForm
from investigations.cases import case_create, evidence_pin
from investigations.models import Case
from investigations.reports.generate import report_request
from investigations.tasks import generate_report

# Server labels: one real server's story each (README "Quick start" tells them).
LIVE = "demo-live"
SILENT = "demo-silent"
ROTATED = "demo-rotated-general-log"
CASE_OWNER = "investigator"
# Short enough that the silent source is flagged a minute after it delivered.
QUIET_SECONDS = 60


def followed_sources(folder: Path) -> list[tuple[str, bool]]:
    """The two followed sources, as the Sources page would save them; (name, made now) each."""
    done = []
    for server, interval in ((LIVE, 5), (SILENT, 5)):
        name = f"{server} general log (followed)"
        if Source.objects.filter(name=name).exists():
            done.append((name, False))
            continue
        form = SourceForm(
            {
                "name": name,
                "kind": Source.Kind.FILE,
                "path": str(folder / server / "general.log"),
                "password_env": "AUDITWEB_SOURCE_MYSQL_PASSWORD",
                "format": general_log.NAME,
                "server": server,
                "timezone": "UTC",
                "interval_seconds": interval,
                "quiet_seconds": QUIET_SECONDS,
                "enabled": True,
            }
        )
        if not form.is_valid():
            raise CommandError(f"the source {name} was refused: {form.errors.as_text()}")
        form.save()
        done.append((name, True))
    return done


def culprit_case(owner: Any, queue: Any) -> Case | None:
    """The case of whoever switched the rotated log's logging off: that statement and their
    destructive ones, pinned, and a PDF report queued. None when the case exists or the log
    shows no such statement."""
    switch_off = (
        Event.objects.filter(server=ROTATED, flags__contains=["anti_forensic"])
        .exclude(user=None)
        .order_by("occurred_at", "id")
        .first()
    )
    if switch_off is None:
        return None
    culprit = switch_off.user
    title = f"Who deleted orders on {ROTATED}? ({culprit})"
    if Case.objects.filter(title=title).exists():
        return None
    case = case_create(
        user=owner,
        title=title,
        description=(
            f"{culprit} deleted rows on {ROTATED}, switched its general log off and on again (what ran "
            "in between was not recorded) and went on deleting. logrotate rotated the log before their "
            "last deletion: that statement's account is known from the Connect in the earlier file. "
            "Pinned: the switch-off and every destructive statement of theirs."
        ),
    )
    pins = Event.objects.filter(server=ROTATED, user=culprit).filter(
        Q(destructive=True) | Q(flags__contains=["anti_forensic"])
    )
    for event in pins.order_by("occurred_at", "id"):
        what = "switched logging off" if "anti_forensic" in event.flags else f"{event.statement_type}"
        evidence_pin(case=case, event=event, user=owner, note=f"{what}; account known by {event.attribution}")
    report_request(case=case, fmt="pdf", user=owner, queue=queue)
    return case


class Command(BaseCommand):
    help = "Add the demo's followed sources and its case with a report (./dev demo runs this)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--followed", required=True, type=Path, help="Folder of the followed demo logs")

    def handle(self, *args: object, **options: Any) -> None:
        for name, made in followed_sources(options["followed"].resolve()):
            self.stdout.write(f"Source {name}: {'added' if made else 'there already'}.")
        owner = get_user_model().objects.filter(username=CASE_OWNER).first()
        if owner is None:
            raise CommandError(f"the login {CASE_OWNER} is missing: create_login makes it first")
        # As the case page does: the worker writes the report once the request is committed.
        case = culprit_case(owner, lambda report_id: generate_report.delay(report_id))
        if case is not None:
            pins = case.evidence.count()
            self.stdout.write(f"Case {case.pk} ({case.title}): {pins} pins, a PDF report queued.")
