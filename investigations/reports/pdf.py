"""The PDF report in its order: the summary page, the timeline with the notes and the gaps, the
evidence, the custody appendix. Apart from the sections it puts in order, so that those
(pdf_report, pdf_summary, pdf_timeline) import no one who imports them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO

from reportlab.platypus import Flowable, KeepTogether, NextPageTemplate, PageBreak, Paragraph

from investigations.models import Case, Report
from investigations.reports import facts
from investigations.reports.pdf_report import (
    STYLES,
    CompactCanvas,
    LazyFlowables,
    ReportDocument,
    _p,
    custody_appendix,
    evidence_tables,
    gaps_section,
    notes_section,
)
from investigations.reports.pdf_summary import frame_height, summary_page
from investigations.reports.pdf_timeline import timeline_flowables, timeline_intro


def story(case: Case, report: Report, progress: Callable[[int], None]) -> Iterator[Flowable]:
    """The summary page; the timeline, the notes and the gaps; the evidence; the custody appendix."""
    found = facts.case_facts(case)
    yield from summary_page(case, report, found, frame_height())
    yield NextPageTemplate("later")
    yield PageBreak()
    line = facts.timeline(case)
    yield KeepTogether(
        [Paragraph("1. Timeline", STYLES["h1"]), *timeline_intro(line), *timeline_flowables(line)]
    )
    yield from notes_section(case)
    yield KeepTogether(gaps_section(case))
    yield NextPageTemplate("evidence-first")
    yield PageBreak()
    integrity: dict[str, int] = {}
    if found.pinned:
        yield from evidence_tables(case, progress, integrity)
    else:
        yield _p("No event is pinned to this case.", "body")
    yield NextPageTemplate("later")
    yield PageBreak()
    yield from custody_appendix(case, integrity, found.heads)


def write_pdf(case: Case, report: Report, out: IO[bytes], progress: Callable[[int], None]) -> None:
    document = ReportDocument(out, case, report)
    document.build(LazyFlowables(story(case, report, progress)), canvasmaker=CompactCanvas)
