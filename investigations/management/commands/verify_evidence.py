"""`manage.py verify_evidence`: prove (or disprove) that neither the logs nor the store nor a
report were altered after the fact. See ingest.custody (what is recorded), ingest.verify (the store
and the files) and investigations.evidence_custody (cases and reports)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from ingest.models import CustodyHead, Source
from ingest.verify import (
    ALTERED,
    OK,
    UNCHECKED,
    Verification,
    event_rows,
    sample_ids,
    verify_event_bytes,
    verify_files,
    verify_store,
)
from investigations.evidence_custody import evidence_digest, verify_case, verify_report
from investigations.models import Case

LABELS = {ALTERED: "ALTERED", UNCHECKED: "NOT CHECKED", OK: "ok"}


class Command(BaseCommand):
    help = (
        "Check the chain of custody: each source's hash chain against the stored events (edits, "
        "insertions, deletions), the original files against their recorded SHA-256 and the events' "
        "raw bytes against the files; with --case, a case's pinned events and report files; with "
        "--report, a report file handed over. Exits 1 when anything was altered."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--source",
            action="append",
            default=[],
            metavar="S",
            help="Only this source (id or name; repeatable)",
        )
        parser.add_argument(
            "--case", type=int, metavar="N", help="Check case N: its pinned events and reports"
        )
        parser.add_argument(
            "--report",
            type=Path,
            metavar="FILE",
            help="Check a report file against the reports AuditWeb stored",
        )
        parser.add_argument(
            "--sample",
            type=int,
            default=200,
            metavar="N",
            help="Re-read this many events (spread over the store) from their original files (default 200)",
        )
        parser.add_argument(
            "--all-events", action="store_true", help="Re-read every event from its original file"
        )
        parser.add_argument("--json", action="store_true", help="Print the result as JSON")
        parser.add_argument(
            "--strict", action="store_true", help="Exit 2 when something could not be checked (a file gone)"
        )

    def handle(self, *args: object, **options: Any) -> None:
        v = Verification()
        if options["case"] is not None or options["report"] is not None:
            sources = self._case_and_report(v, options["case"], options["report"])
        else:
            sources = self._sources(options["source"])
            self._store(v, sources, options)
        heads = {
            h.source.name: {"link": h.seq, "hash": bytes(h.hash).hex()}
            for h in CustodyHead.objects.filter(source__in=sources).select_related("source")
        }
        digest = None
        if options["case"] is not None:  # as the case's PDF report prints it, to compare
            digest = dict(
                zip(("sha256", "pins"), evidence_digest(Case.objects.get(pk=options["case"])), strict=True)
            )
        self._print(v, heads, digest, as_json=options["json"])
        if v.altered:
            raise CommandError(f"evidence altered: {len(v.altered)} finding(s)", returncode=1)
        if options["strict"] and v.unchecked:
            raise CommandError(f"{len(v.unchecked)} thing(s) could not be checked", returncode=2)

    def _store(self, v: Verification, sources: list[Source], options: dict[str, Any]) -> None:
        """The sources' chains and files, and their events' bytes (a sample, or all of them)."""
        verify_store(v, sources)
        files = [f for s in sources for f in s.files.select_related("source").order_by("pk")]
        verify_files(v, files)
        if options["all_events"]:
            verify_event_bytes(v, event_rows("source_file_id = ANY(%s)", [[f.pk for f in files]]))
        elif options["sample"] > 0 and sources:
            ids = sample_ids([s.pk for s in sources], options["sample"])
            verify_event_bytes(v, event_rows("id = ANY(%s)", [ids]))

    def _case_and_report(self, v: Verification, case_id: int | None, report: Path | None) -> list[Source]:
        sources: dict[int, Source] = {}
        if case_id is not None:
            case = Case.objects.filter(pk=case_id).first()
            if case is None:
                raise CommandError(f"no case {case_id}")
            sources |= {s.pk: s for s in verify_case(v, case)}
        if report is not None:
            if not report.is_file():
                raise CommandError(f"{report}: no such file")
            listed = verify_report(v, report)
            if case_id is None:  # the sources of the events it lists: their chains too
                verify_store(v, listed)
                sources |= {s.pk: s for s in listed}
        return list(sources.values())

    def _sources(self, wanted: list[str]) -> list[Source]:
        if not wanted:
            return list(Source.objects.order_by("pk"))
        found = []
        for w in wanted:
            source = Source.objects.filter(pk=int(w)).first() if w.isascii() and w.isdigit() else None
            source = source or Source.objects.filter(name=w).first()
            if source is None:
                raise CommandError(f"no source {w!r} (give its id or its name)")
            found.append(source)
        return found

    def _print(
        self,
        v: Verification,
        heads: dict[str, dict[str, Any]],
        digest: dict[str, Any] | None,
        *,
        as_json: bool,
    ) -> None:
        if as_json:
            extra = {"chain_heads": heads} | ({"evidence_digest": digest} if digest else {})
            self.stdout.write(json.dumps(v.as_dict() | extra, indent=2, default=str))
            return
        self.stdout.write(f"AuditWeb evidence check, {timezone.now():%Y-%m-%d %H:%M:%S} UTC")
        counts = ", ".join(f"{n:,} {what}" for what, n in v.counts.items()) or "nothing"
        self.stdout.write(f"Checked: {counts}.")
        for status in (ALTERED, UNCHECKED, OK):
            for f in (f for f in v.findings if f.status == status):
                where = " ".join(
                    part
                    for part in (
                        f"source {f.source!r}" if f.source else "",
                        f"link {f.link}" if f.link else "",
                        f"file {f.file}" if f.file and f.file not in f.message else "",
                    )
                    if part
                )
                ids = f" (event ids {', '.join(map(str, f.event_ids[:10]))}" if f.event_ids else ""
                ids += ", ...)" if len(f.event_ids) > 10 else ")" if ids else ""
                self.stdout.write(f"{LABELS[status]:11} [{f.what}] {where}: {f.message}{ids}")
        for name, head in heads.items():
            self.stdout.write(f"Chain head of {name!r}: link {head['link']}, {head['hash']}")
        if digest:
            self.stdout.write(f"Evidence digest of the case's {digest['pins']} pin(s): {digest['sha256']}")
        if v.altered:
            self.stdout.write(f"Result: ALTERED ({len(v.altered)} finding(s)).")
        else:
            unchecked = f", {len(v.unchecked)} thing(s) could not be checked" if v.unchecked else ""
            self.stdout.write(f"Result: intact{unchecked}.")
