"""The PDF's first page: the case in plain words for a manager, with the figures an investigator
checks. Who (accounts and servers, and how sure each attribution is), what (statement types,
destructive ones, tables), when (first and last, the case's window, in UTC), how many rows, the
confidence of each attribution with its reason, the gaps in the logs over the window (each reason
once), the chain heads a reader can verify later, and the report's own identity.

It is one page whatever the case: lists are bounded (facts.LISTED, "and N more") and the whole
is shrunk to the frame if a long title or many gap reasons would push it over.
"""

from __future__ import annotations

from datetime import datetime

from reportlab.lib import colors
from reportlab.lib.units import mm
from reportlab.platypus import Flowable, KeepInFrame, Spacer, Table, TableStyle

from investigations.models import Case, Report
from investigations.reports import content, facts
from investigations.reports.pdf_report import (
    BODY_W,
    DANGER,
    INK,
    MARGIN,
    MUTED,
    NAVY,
    PAGE_H,
    SHADE,
    TextLines,
    _heads,
    _p,
    _table,
    esc,
    utc,
)

LABEL_W = 27 * mm
TEXT_W = BODY_W - LABEL_W
ROWS_NOT_RECORDED = "not recorded by this log format"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _day_and_time(when: datetime | None) -> str:
    return utc(when) if when is not None else "unknown"


def in_short(f: facts.Facts) -> str:
    """The case in two or three sentences, for a reader who reads nothing else."""
    if not f.pinned:
        return "No event is pinned to this case yet: the report has no evidence to summarise."
    who = ", ".join(a.who for a in f.accounts[:3]) + (
        " and others" if len(f.accounts) > 3 or f.accounts_more else ""
    )
    when = (
        f"at {utc(f.first)}"
        if f.first == f.last
        else f"between {utc(f.first)} and {utc(f.last)}"
        if f.first
        else "at unknown times"
    )
    servers = ", ".join(f.servers) or "no known server"
    text = (
        f"{_plural(f.pinned, 'event')} pinned as evidence, {f.destructive:,} of them destructive, "
        f"{when} on {servers}, by "
        f"{_plural(len(f.accounts) + f.accounts_more, 'account')}: {who}."
    )
    inferred = sum(a.confidence.get("inferred", 0) for a in f.accounts)
    unknown = sum(a.confidence.get("unknown", 0) for a in f.accounts)
    if inferred or unknown:
        text += (
            f" The account of {_plural(inferred, 'event')} is inferred and of"
            f" {_plural(unknown, 'event')} unknown (see Confidence)."
        )
    else:
        text += " Every pinned event's account is confirmed by the logs."
    if f.gaps:
        gaps = sum(g.count for g in f.gaps)
        text += f" The logs have {_plural(gaps, 'gap')} in the window: what ran then is not in them."
    changed = f.pinned - f.integrity.get(content.AS_PINNED, 0)
    text += (
        f" {_plural(changed, 'pinned event')} differ from the store or are gone from it."
        if changed
        else " Every pinned event is in the store as it was pinned."
    )
    return text


def summary_page(case: Case, report: Report, f: facts.Facts, frame_height: float) -> list[Flowable]:
    band = Table(
        [
            [_p("FORENSIC EVIDENCE REPORT · SUMMARY · AUDITWEB · CONFIDENTIAL", "kicker")],
            [_p(esc(case.title), "title")],
        ],
        colWidths=[BODY_W],
    )
    band.setStyle(
        TableStyle(
            [
                ("LINEBELOW", (0, -1), (-1, -1), 2, NAVY),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("BOTTOMPADDING", (0, -1), (-1, -1), 6),
            ]
        )
    )
    rows = [
        ("Report", _identity(case, report)),
        ("In short", [_p(esc(in_short(f)), "body")]),
        ("Who", _who(f)),
        ("What", _what(f)),
        ("When", _when(f)),
        ("How many rows", _rows(f)),
        ("Confidence", _confidence(f)),
        ("Gaps in the logs", _gaps(f)),
        ("Chain heads", _heads_block(case, f)),
    ]
    table = Table(
        [[_p(esc(label), "cellb"), cell] for label, cell in rows], colWidths=[LABEL_W, TEXT_W], splitByRow=0
    )
    table.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("BACKGROUND", (0, 0), (0, -1), SHADE),
                ("LINEBELOW", (0, 0), (-1, -1), 0.4, colors.HexColor("#c9d1da")),
                ("LEFTPADDING", (0, 0), (-1, -1), 4),
                ("RIGHTPADDING", (0, 0), (-1, -1), 4),
                ("TOPPADDING", (0, 0), (-1, -1), 3.5),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 3.5),
            ]
        )
    )
    body = [band, Spacer(1, 6), table]
    return [KeepInFrame(BODY_W, frame_height, body, mode="shrink")]


def _identity(case: Case, report: Report) -> list[Flowable]:
    by = report.generated_by.get_username()
    investigators = ", ".join(sorted(u.get_username() for u in case.investigators.all())) or "none"
    lines = [
        (
            f"Report #{report.pk} of case #{case.pk} ({case.get_status_display()}), PDF",
            "Helvetica-Bold",
            8.5,
            INK,
        ),
        (f"generated {utc(report.requested_at, False)} by {by}", "Helvetica", 8.5, INK),
        (
            f"case opened {utc(case.created_at, False)} by {case.created_by.get_username()}",
            "Helvetica",
            8,
            MUTED,
        ),
        (f"investigators: {investigators}", "Helvetica", 8, MUTED),
    ]
    return [TextLines(lines)]


def _who(f: facts.Facts) -> list[Flowable]:
    if not f.accounts:
        return [_p("No account: nothing is pinned.", "cell")]
    rows: list[list[object]] = [
        _heads("Account (user@host)", "Server", "Pinned", "Destructive", "Attribution")
    ]
    for a in f.accounts:
        sure = ", ".join(
            f"{a.confidence[level]:,} {level}" for level in facts.CONFIDENCE_ORDER if a.confidence.get(level)
        )
        color = DANGER if a.destructive else INK
        rows.append(
            [
                TextLines([(a.who, "Helvetica-Bold", 8, color)]),
                TextLines([(", ".join(a.servers), "Helvetica", 8, INK)]),
                _p(f"{a.events:,}", "num"),
                _p(f"{a.destructive:,}", "num"),
                TextLines(
                    [(sure, "Helvetica", 8, DANGER if "inferred" in sure or "unknown" in sure else INK)]
                ),
            ]
        )
    widths = [46 * mm, 30 * mm, 14 * mm, 18 * mm, TEXT_W - 108 * mm - 8]
    flow: list[Flowable] = [_table(rows, widths)]
    if f.accounts_more:
        flow.append(
            _p(f"… and {_plural(f.accounts_more, 'more account')} (in the evidence section).", "small")
        )
    return flow


def _counted(items: list[facts.Counted], more: int, what: str) -> str:
    parts = []
    for c in items:
        text = f"<b>{esc(c.name)}</b> {c.events:,}"
        if c.destructive:
            text += f' (<font color="#b42318">{c.destructive:,} destructive</font>)'
        parts.append(text)
    if more:
        parts.append(f"and {_plural(more, 'more ' + what)}")
    return " · ".join(parts) or "none"


def _what(f: facts.Facts) -> list[Flowable]:
    return [
        _p("Statement types: " + _counted(f.types, f.types_more, "type"), "cell"),
        _p("Tables named: " + _counted(f.tables, f.tables_more, "table"), "cell"),
    ]


def _when(f: facts.Facts) -> list[Flowable]:
    start, end = f.window
    said = (
        "set on the case"
        if f.window_set
        else "not set on the case: taken from the first and last pinned events"
    )
    lines = [
        f"First pinned event {_day_and_time(f.first)}; last {_day_and_time(f.last)}.",
        f"The case's window: {_day_and_time(start)} to {_day_and_time(end)} ({said}).",
        "All times in this report are UTC (Coordinated Universal Time), to the microsecond where the log"
        " gives it.",
    ]
    return [_p(esc(line), "cell") for line in lines]


def _rows(f: facts.Facts) -> list[Flowable]:
    lines = []
    if f.rows_known:
        lines.append(
            f"{f.rows_affected:,} rows affected, as logged for {_plural(f.rows_known, 'pinned statement')}."
        )
    for fmt, n in f.rows_unrecorded:
        lines.append(f"{_plural(n, 'statement')} from {fmt}: {ROWS_NOT_RECORDED}.")
    if not lines:
        lines.append("No pinned statement.")
    return [_p(esc(line), "cell") for line in lines]


def _confidence(f: facts.Facts) -> list[Flowable]:
    if not f.reasons:
        return [_p("No pinned event.", "cell")]
    flow: list[Flowable] = []
    for level, why, n in f.reasons:
        color = "#b42318" if level in ("inferred", "unknown") else "#1d232a"
        sentence = why[0].upper() + why[1:] if why else why
        flow.append(
            _p(
                f'<font color="{color}"><b>{esc(level.capitalize())}</b></font>, '
                f"{_plural(n, 'event')}: {esc(sentence)}."
            )
        )
    return flow


def _gaps(f: facts.Facts) -> list[Flowable]:
    if not f.gaps:
        start, end = f.window
        return [_p(esc(f"None known from {_day_and_time(start)} to {_day_and_time(end)}."), "cell")]
    flow: list[Flowable] = []
    for g in f.gaps:
        span = f"from {_day_and_time(g.first)}" if g.first else "from an unknown time"
        if g.still_open:
            span += ", one still open" if g.count > 1 else " and still open"
        else:
            span += f" to {_day_and_time(g.last)}"
        text = (
            f"<b>{esc(g.reason)}</b>: {_plural(g.count, 'gap')} on {esc(', '.join(g.servers))}, {esc(span)}."
        )
        flow.append(_p(text, "cell"))
    flow.append(_p("Statements run in a gap are not in that log: absence of evidence there is not evidence "
                   "of absence. Each gap is listed in section 3.", "small"))  # fmt: skip
    return flow


def _heads_block(case: Case, f: facts.Facts) -> list[Flowable]:
    h = f.heads
    lines: list[tuple[str, str, float, object]] = [
        (f"Evidence digest ({_plural(h.pins, 'pin')}): {h.evidence_digest}", "Courier", 6.8, INK),
    ]
    for name, seq, digest in h.sources:
        lines.append((f"Source {name}: link {seq:,}, {digest}", "Courier", 6.8, INK))
    counts = "; ".join(f"{n:,} {state}" for state, n in sorted(f.integrity.items())) or "no pins"
    return [
        TextLines(lines),
        _p(
            esc(
                f"Pins against the store now: {counts}. manage.py verify_evidence --case {case.pk} "
                "recomputes these values and checks each source's chain; write them down outside AuditWeb "
                "to compare later."
            ),
            "small",
        ),
    ]


def frame_height() -> float:
    """The body frame's height on the first page (see ReportDocument's margins)."""
    return PAGE_H - 2 * (MARGIN + 6 * mm)
