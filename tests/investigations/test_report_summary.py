"""The PDF report's first page and timeline, read back from the PDF with pdftotext: the summary's
figures are the case's, gap reasons are said once, chain heads are printed as the custody module
computes them, server labels are never broken inside a word, and the timeline covers the window
at any scale."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command

from ingest.models import Event, Gap
from investigations.cases import case_create, evidence_pin
from investigations.evidence_custody import chain_heads
from investigations.reports import facts
from investigations.reports.pdf_summary import ROWS_NOT_RECORDED
from investigations.reports.text import BREAK_AFTER
from tests.conftest import FIXTURES
from tests.investigations.logs import genlog

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed"
    ),
]

CRIME_LOG = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"
LONG_LABEL = "demo-general-log-replica-eu-west-7"
T0 = datetime(2026, 5, 1, 3, 0, 0, 120_000, tzinfo=UTC)


@pytest.fixture(autouse=True)
def report_dir(tmp_path, settings):
    settings.REPORT_DIR = tmp_path / "reports"
    return settings.REPORT_DIR


def pdf_text(path: Path, first: int | None = None, last: int | None = None) -> str:
    pages = [*(["-f", str(first)] if first else []), *(["-l", str(last)] if last else [])]
    out = subprocess.run(["pdftotext", *pages, str(path), "-"], capture_output=True, check=True)
    return out.stdout.decode()


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def crime_case(investigator):
    """mallory's and bob's destructive statements of the crime scene, in its window."""
    from ingest.pipeline import ingest_file, source_for_path

    ingest_file(CRIME_LOG, source=source_for_path(CRIME_LOG, server="db-prod-1", fmt="auto", tz="UTC"))
    case = case_create(
        user=investigator,
        title="shop.orders is gone",
        window_start=datetime(2026, 11, 23, 12, 48, 30, tzinfo=UTC),
        window_end=datetime(2026, 11, 23, 12, 48, 45, tzinfo=UTC),
    )
    for event in Event.objects.filter(user__in=["mallory", "bob"], destructive=True).order_by("occurred_at"):
        evidence_pin(case=case, event=event, user=investigator)
    return case


def scene(ingest_bytes, investigator, *, server: str, offsets: list[timedelta], window=(None, None)):
    """carol's statements at T0 + each offset on `server`, every one pinned to a new case."""
    sql = ("DELETE FROM orders WHERE id = %d", "SELECT * FROM orders WHERE id = %d")
    records = [(T0, 11, "Connect", "carol@10.1.2.3 on shop using TCP/IP")]
    records += [(T0 + off, 11, "Query", sql[i % 2] % i) for i, off in enumerate(offsets)]
    ingest_bytes(genlog(*records), server=server, name=f"{server}.log")
    case = case_create(user=investigator, title="carol", window_start=window[0], window_end=window[1])
    for event in Event.objects.filter(server=server, command="Query").order_by("occurred_at"):
        evidence_pin(case=case, event=event, user=investigator)
    return case


def test_the_first_page_summarises_the_case_with_its_own_figures(report_written, crime_case, investigator):
    report = report_written(crime_case, "pdf", investigator)
    assert report.status == "done", report.error
    page1 = flat(pdf_text(report.path, 1, 1))
    pinned = Event.objects.filter(id__in=crime_case.evidence.values("event_id"))
    destructive = pinned.filter(destructive=True).count()
    assert f"{pinned.count()} events pinned as evidence, {destructive} of them destructive" in page1
    for user in ("mallory", "bob"):
        mine = pinned.filter(user=user)
        host = mine.values_list("host", flat=True).first()
        # the Who table: account, server, pinned, destructive, attribution
        row = f"{user}@{host} db-prod-1 {mine.count()} {mine.filter(destructive=True).count()}"
        assert row in page1
    first, last = (
        pinned.order_by(o).values_list("occurred_at", flat=True).first()
        for o in ("occurred_at", "-occurred_at")
    )
    assert (
        f"First pinned event {first:%Y-%m-%d %H:%M:%S}" in page1 and f"last {last:%Y-%m-%d %H:%M:%S}" in page1
    )
    assert "The case's window: 2026-11-23 12:48:30 UTC to 2026-11-23 12:48:45 UTC (set on the case)" in page1
    # The general log does not say how many rows a statement changed.
    assert f"{pinned.count()} statements from the log {CRIME_LOG.name}: {ROWS_NOT_RECORDED}." in page1
    assert f"Confirmed, {pinned.count()} events: The connection's login" in page1
    assert f"Report #{report.pk} of case #{crime_case.pk} (open), PDF" in page1
    assert "by ivy" in page1
    # One page: the timeline begins the second.
    assert flat(pdf_text(report.path, 2, 2)).startswith(f"AuditWeb evidence report · Case #{crime_case.pk}")
    assert "1. Timeline" in pdf_text(report.path, 2, 2) and "1. Timeline" not in page1


def test_each_gap_reason_is_printed_once(report_written, crime_case, investigator):
    report = report_written(crime_case, "pdf", investigator)
    page1 = flat(pdf_text(report.path, 1, 1))
    rest = flat(pdf_text(report.path, 2))
    off = Gap.objects.filter(reason=Gap.Reason.LOGGING_OFF)
    assert off.count() >= 2
    # the summary: one line per reason, with how many
    assert page1.count("logging switched off") == 1
    assert f"logging switched off: {off.count()} gaps on db-prod-1" in page1
    # the list: each gap's reason once, as its detail says it
    assert "logging switched off. logging switched off" not in rest
    assert rest.count("logging switched off") == off.count()
    for gap in off:
        assert flat(gap.detail) in rest


def test_another_servers_open_gap_is_not_told_as_the_evidences(report_written, crime_case, investigator):
    """A gap still open on a server none of the pins come from is not in the summary, and each
    server's gaps of one reason are told apart."""
    first = Event.objects.filter(server="db-prod-1").order_by("occurred_at").first()
    Gap.objects.create(server="elsewhere-9", reason=Gap.Reason.LOGGING_OFF, started_at=first.occurred_at,
                       detail="logging switched off on another server", source_file=first.source_file,
                       line=1, byte_offset=0)  # fmt: skip
    page1 = flat(pdf_text(report_written(crime_case, "pdf", investigator).path, 1, 1))
    assert "elsewhere-9" not in page1
    off = Gap.objects.filter(reason=Gap.Reason.LOGGING_OFF, server="db-prod-1").count()
    assert f"logging switched off: {off} gaps on db-prod-1, from " in page1


def test_the_chain_heads_are_those_the_custody_module_computes(report_written, crime_case, investigator):
    report = report_written(crime_case, "pdf", investigator)
    heads = chain_heads(crime_case)
    assert heads.pins == crime_case.evidence.count() and heads.sources
    page1 = flat(pdf_text(report.path, 1, 1))
    assert f"Evidence digest ({heads.pins} pins): {heads.evidence_digest}" in page1
    for _name, seq, digest in heads.sources:
        assert seq > 0 and digest in page1
    assert heads.evidence_digest in flat(pdf_text(report.path, 4))  # and in the custody appendix
    # verify_evidence prints the same digest for the reader to compare
    out = io.StringIO()
    call_command("verify_evidence", "--case", str(crime_case.pk), stdout=out)
    assert f"Evidence digest of the case's {heads.pins} pin(s): {heads.evidence_digest}" in out.getvalue()


def test_the_evidence_digest_changes_when_a_pin_does(crime_case, investigator):
    before = chain_heads(crime_case).evidence_digest
    crime_case.evidence.order_by("event_id").first().delete()
    assert chain_heads(crime_case).evidence_digest != before


def test_a_long_server_label_is_never_broken_inside_a_word(report_written, ingest_bytes, investigator):
    case = scene(
        ingest_bytes, investigator, server=LONG_LABEL, offsets=[timedelta(seconds=s) for s in range(3)]
    )
    Gap.objects.create(
        server=LONG_LABEL,
        reason=Gap.Reason.LOGGING_OFF,
        started_at=T0,
        ended_at=T0 + timedelta(seconds=1),
        detail="logging switched off by 'SET GLOBAL general_log = OFF'",
        source_file=Event.objects.filter(server=LONG_LABEL).first().source_file,
        line=2,
        byte_offset=10,
    )
    report = report_written(case, "pdf", investigator)
    text = pdf_text(report.path)
    assert LONG_LABEL in text  # whole where there is room (the summary)
    for token in text.split():
        if token != LONG_LABEL and LONG_LABEL.startswith(token) and len(token) > 1:
            assert token[-1] in BREAK_AFTER, f"{LONG_LABEL!r} broken inside a word: {token!r}"
        piece = re.match(r"[\w-]+", token)
        if piece and LONG_LABEL.endswith(piece.group()) and piece.group() != LONG_LABEL:
            start = len(LONG_LABEL) - len(piece.group())
            assert start == 0 or LONG_LABEL[start - 1] in BREAK_AFTER, f"broken inside a word: {token!r}"


def test_events_within_one_second_get_a_timeline_per_100_ms(report_written, ingest_bytes, investigator):
    offsets = [timedelta(milliseconds=m) for m in (0, 3, 40, 300, 310, 555, 870)]
    case = scene(ingest_bytes, investigator, server="db-burst", offsets=offsets)
    line = facts.timeline(case)
    assert line is not None and line.bin.unit == "100 ms"
    assert sum(line.pinned_destructive) + sum(line.pinned_other) == len(offsets)
    assert sum(line.pinned_destructive) == 4  # the DELETEs
    assert sum(line.logged) == len(offsets) + 1  # and carol's Connect
    assert line.starts[0] <= T0 and line.starts[-1] + line.bin.width > T0 + offsets[-1]
    report = report_written(case, "pdf", investigator)
    page2 = pdf_text(report.path, 2, 2)
    assert "Events per 100 ms" in page2
    labels = re.findall(r"03:00:00\.\d\b", page2)
    assert len(labels) >= 3 and len(set(labels)) == len(labels)  # axis labels that differ


def test_events_over_a_week_get_a_timeline_over_the_whole_window(report_written, ingest_bytes, investigator):
    window = (datetime(2026, 4, 30, tzinfo=UTC), datetime(2026, 5, 7, tzinfo=UTC))
    offsets = [timedelta(hours=h) for h in (1, 30, 31, 90, 140)]
    case = scene(ingest_bytes, investigator, server="db-slow", offsets=offsets, window=window)
    line = facts.timeline(case)
    assert line is not None and line.bin.unit == "6 hours"
    assert line.starts[0] == window[0] and line.starts[-1] + line.bin.width == window[1]
    assert sum(line.pinned_destructive) + sum(line.pinned_other) == len(offsets)
    report = report_written(case, "pdf", investigator)
    page2 = pdf_text(report.path, 2, 2)
    assert "Events per 6 hours" in page2
    assert "04-30 00:00" in page2 and "05-06 00:00" in page2


def test_rows_affected_are_summed_where_the_log_gives_them(report_written, ingest_bytes, investigator):
    case = scene(
        ingest_bytes, investigator, server="db-rows", offsets=[timedelta(seconds=s) for s in range(3)]
    )
    first = Event.objects.filter(server="db-rows", command="Query").order_by("occurred_at").first()
    Event.objects.filter(pk=first.pk).update(rows_affected=12)
    f = facts.case_facts(case)
    assert (f.rows_affected, f.rows_known) == (12, 1)
    report = report_written(case, "pdf", investigator)
    page1 = flat(pdf_text(report.path, 1, 1))
    assert "12 rows affected, as logged for 1 pinned statement." in page1
    assert f"2 statements from the log db-rows.log: {ROWS_NOT_RECORDED}." in page1


def test_the_summary_stays_one_page_with_many_accounts_and_a_long_title(
    report_written, ingest_bytes, investigator
):
    records = []
    for n in range(1, 21):  # twenty accounts, each with its own statement type and table
        when = T0 + timedelta(seconds=n)
        records.append(
            (when, n, "Connect", f"user{n:02d}-{'x' * 40}@host-{n}.example.org on shop using TCP/IP")
        )
        records.append((when, n, "Query", f"DELETE FROM shop.t{n} WHERE id = {n}"))
        records.append((when, n, "Query", f"CREATE TABLE shop.n{n} (id int)"))
    ingest_bytes(genlog(*records), server=LONG_LABEL, name="many.log")
    case = case_create(user=investigator, title="W" * 200)
    for event in Event.objects.filter(command="Query").order_by("occurred_at"):
        evidence_pin(case=case, event=event, user=investigator)
    report = report_written(case, "pdf", investigator)
    page1 = flat(pdf_text(report.path, 1, 1))
    assert "Chain heads" in page1 and "and 14 more accounts" in page1
    assert "1. Timeline" in pdf_text(report.path, 2, 2)
