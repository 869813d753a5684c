"""The PDF report, drawn with reportlab: a title page with the case's facts, a summary of
the evidence with a timeline chart, the analyst's notes and the gaps in the logs; the evidence
table (full statement, account, session, source file, line, offset and hashes of each event);
and an appendix on the chain of custody. Every page names the case, the report, who generated
it and when, and its number of the total.

Memory stays flat with the size of the case: the evidence table is made a chunk of rows at a
time as layout asks for it (`LazyFlowables`), and pages leave memory as they are finished but
for their compressed content. Every string from a log is escaped for reportlab's markup, with
non-printing characters (and characters the standard fonts cannot draw) shown as escapes.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import IO, Any

from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.lib.utils import simpleSplit
from reportlab.pdfbase.pdfdoc import PDFArray, PDFDictionary, PDFName, PDFStream
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    BaseDocTemplate,
    Flowable,
    Frame,
    PageTemplate,
    Paragraph,
    Spacer,
    Table,
    TableStyle,
)

from investigations.evidence_custody import ChainHeads
from investigations.models import Case, Report
from investigations.reports import content
from investigations.reports.text import (
    break_token,
    gap_reason,
    pdf_markup,
    printable_latin1,
    unbreakable_parts,
    wrap_mono,
)

SQL_SHOWN_MAX = 20_000  # characters of one statement printed; the rest is named, and is in the JSON report
SPLIT_ROW_AT = 3_000  # characters of a statement from which its row may be split across pages
LOOKAHEAD = 4  # flowables made ahead of the one being laid out
# How the account is known (ingest.models.Event.Attribution), as the evidence table says it.
ATTRIBUTION_SHORT = {
    "record": "account named by the record",
    "connect": "account from its login, same file",
    "connect_earlier_file": "account from its login, earlier file",
    "inferred_reopen": "INFERRED across a log reopening",
    "unattributed": "account unknown",
}

INK = colors.HexColor("#1d232a")
MUTED = colors.HexColor("#5b6672")
NAVY = colors.HexColor("#14202e")
RULE = colors.HexColor("#c9d1da")
SHADE = colors.HexColor("#f2f5f8")
DANGER = colors.HexColor("#b42318")
DANGER_BG = colors.HexColor("#fdecea")
SQL_BACK = colors.HexColor("#f4f6f8")
OTHER_BAR = colors.HexColor("#7d8fa3")

PAGE_W, PAGE_H = A4
NO_PADDING = {"leftPadding": 0, "rightPadding": 0, "topPadding": 0, "bottomPadding": 0}
MARGIN = 18 * mm
BODY_W = PAGE_W - 2 * MARGIN


def _style(name: str, **kw: Any) -> ParagraphStyle:
    base = {"fontName": "Helvetica", "fontSize": 9, "leading": 11.5, "textColor": INK}
    return ParagraphStyle(name, **{**base, **kw})


STYLES = {
    "kicker": _style("kicker", fontName="Helvetica-Bold", fontSize=8.5, textColor=MUTED, leading=11),
    "title": _style("title", fontName="Helvetica-Bold", fontSize=20, leading=24, spaceAfter=4),
    "h1": _style(
        "h1", fontName="Helvetica-Bold", fontSize=13, leading=16, spaceBefore=10, spaceAfter=5, textColor=NAVY
    ),
    "h2": _style("h2", fontName="Helvetica-Bold", fontSize=10.5, leading=13, spaceBefore=8, spaceAfter=3),
    "body": _style("body"),
    "small": _style("small", fontSize=7.5, leading=9.5, textColor=MUTED),
    "cell": _style("cell", fontSize=8, leading=10),
    "cellb": _style("cellb", fontName="Helvetica-Bold", fontSize=8, leading=10),
    "head": _style("head", fontName="Helvetica-Bold", fontSize=7.5, leading=9.5, textColor=colors.white),
    "num": _style("num", fontSize=8, leading=10, alignment=TA_RIGHT),
    "sql": _style(
        "sql",
        fontName="Courier",
        fontSize=7.5,
        leading=9.2,
        backColor=colors.HexColor("#f4f6f8"),
        borderPadding=(1.5, 2, 1.5, 2),
        spaceBefore=2,
        spaceAfter=3,
    ),
    "prov": _style("prov", fontName="Courier", fontSize=6.6, leading=8.3, textColor=MUTED),
    "note": _style("note", fontName="Helvetica-Oblique", fontSize=8, leading=10),
    "warn": _style("warn", fontName="Helvetica-Bold", fontSize=8, leading=10, textColor=DANGER),
}


def esc(text: object) -> str:
    """Any value as safe Paragraph markup (log text included)."""
    return pdf_markup("" if text is None else str(text))


def utc(when: datetime | None, micro: bool = True) -> str:
    if when is None:
        return "unknown"
    micro = micro and when.microsecond != 0
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f" if micro else "%Y-%m-%d %H:%M:%S") + " UTC"


class LazyFlowables:
    """A list-like of flowables for `BaseDocTemplate.build` that makes them from an iterator as
    layout reaches them: reportlab takes flowables from the front (and puts split halves back
    there), so only the few ahead of the one being laid out exist at once."""

    def __init__(self, source: Iterable[Flowable]) -> None:
        self._ahead: list[Flowable] = []
        self._source: Iterator[Flowable] | None = iter(source)

    def _fill(self, n: int) -> None:
        while self._source is not None and len(self._ahead) < n:
            try:
                self._ahead.append(next(self._source))
            except StopIteration:
                self._source = None

    def __len__(self) -> int:
        self._fill(LOOKAHEAD)
        return len(self._ahead)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            self._fill(max(index.stop or LOOKAHEAD, LOOKAHEAD))
        else:
            self._fill(index + 1)
        return self._ahead[index]

    def __setitem__(self, index: int | slice, value: Any) -> None:
        self._ahead[index] = value

    def __delitem__(self, index: int | slice) -> None:
        self._fill(1)
        del self._ahead[index]

    def insert(self, index: int, value: Flowable) -> None:
        self._ahead.insert(index, value)


class MonoBlock(Flowable):
    """Monospaced text (a statement, a file path and hashes) wrapped at a fixed number of
    characters and drawn line by line: no markup to parse and no widths to measure, which is
    most of the time a Paragraph takes. It splits between lines, so a very long statement
    runs over several pages."""

    def __init__(self, text: str | list[str], *, size: float, leading: float, color: Any = INK,
                 back: Any = None, space: tuple[float, float] = (0, 0)) -> None:  # fmt: skip
        super().__init__()
        self.text = text if isinstance(text, str) else None
        self.lines: list[str] = [] if isinstance(text, str) else text
        self.size, self.leading, self.color, self.back = size, leading, color, back
        self.spaceBefore, self.spaceAfter = space
        self.pad = 2 if back is not None else 0
        self._wrapped_at = -1.0

    def _columns(self, width: float) -> int:
        return max(8, int((width - 2 * self.pad) / (0.6 * self.size)))  # Courier: 600/1000 em a glyph

    def wrap(self, avail_width: float, avail_height: float) -> tuple[float, float]:
        if self.text is not None and avail_width != self._wrapped_at:
            self.lines = wrap_mono(self.text, self._columns(avail_width))
            self._wrapped_at = avail_width
        self.width = avail_width
        self.height = len(self.lines) * self.leading + 2 * self.pad
        return self.width, self.height

    def split(self, avail_width: float, avail_height: float) -> list[Flowable]:
        self.wrap(avail_width, avail_height)
        fits = int((avail_height - 2 * self.pad) // self.leading)
        if fits <= 0 or fits >= len(self.lines):
            return []
        kw = {"size": self.size, "leading": self.leading, "color": self.color, "back": self.back}
        return [MonoBlock(self.lines[:fits], **kw), MonoBlock(self.lines[fits:], **kw)]

    def draw(self) -> None:
        canv = self.canv
        if self.back is not None:
            canv.setFillColor(self.back)
            canv.rect(0, 0, self.width, self.height, stroke=0, fill=1)
        text = canv.beginText(self.pad, self.height - self.pad - self.size * 0.8)
        text.setFont("Courier", self.size, self.leading)
        text.setFillColor(self.color)
        for line in self.lines:
            text.textLine(line)
        canv.drawText(text)


class TextLines(Flowable):
    """A few short lines of plain text, each in its own font, wrapped to the width by measuring
    words (reportlab's C accelerated widths): the evidence table's time, account and session
    without the markup parser a Paragraph needs. The text is drawn as it is, made printable.

    Long tokens (server labels, paths, user@host, session keys) are broken after a separator
    (`text.break_token`), never inside a part; a part with no separator that is wider than the
    column alone makes its line's font smaller (down to SHRINK_MIN of its size) before any cut."""

    def __init__(self, lines: list[tuple[str, str, float, Any]]) -> None:
        super().__init__()
        self.source = [(printable_latin1(text), font, size, color) for text, font, size, color in lines]
        self.lines: list[tuple[str, str, float, Any]] = []

    def wrap(self, avail_width: float, avail_height: float) -> tuple[float, float]:
        self.lines = []
        for text, font, size, color in self.source:
            if "\n" not in text and stringWidth(text, font, size) <= avail_width:  # most lines: as they are
                self.lines.append((text, font, size, color))
                continue
            size = _shrunk(text, font, size, avail_width)
            self.lines += [(part, font, size, color) for part in _fit(text, font, size, avail_width)]
        self.width = avail_width
        self.height = sum(size * 1.25 for _, _, size, _ in self.lines)
        return self.width, self.height

    def draw(self) -> None:
        y = self.height
        for text, font, size, color in self.lines:
            y -= size * 1.25
            self.canv.setFont(font, size)
            self.canv.setFillColor(color)
            self.canv.drawString(0, y + size * 0.25, text)


SHRINK_MIN = 0.72  # of a line's font size, to keep a part with no separator whole


def _shrunk(text: str, font: str, size: float, width: float) -> float:
    """The font size at which the widest unbreakable part of `text` fits `width` (never below
    SHRINK_MIN of `size`; parts longer than 60 characters are left to be cut)."""
    parts = [p for p in unbreakable_parts(text) if len(p) <= 60]
    widest = max((stringWidth(p, font, size) for p in parts), default=0.0)
    if widest <= width or widest == 0:
        return size
    return max(size * SHRINK_MIN, size * width / widest * 0.98)


def _fit(text: str, font: str, size: float, width: float) -> list[str]:
    """Lines of `text` no wider than `width`: broken at spaces, and a word wider than the line
    (a long host name, a session key, a path) broken after a separator (`-`, `/`, `.`, `@`...)."""
    lines: list[str] = []

    def fits(piece: str) -> bool:
        return stringWidth(piece, font, size) <= width

    for line in simpleSplit(text, font, size, width) or [""]:
        if fits(line):
            lines.append(line)
            continue
        words = line.split(" ")
        current = ""
        for word in words:
            candidate = f"{current} {word}" if current else word
            if fits(candidate):
                current = candidate
                continue
            if current:
                lines.append(current)
            pieces = break_token(word, fits)
            lines += pieces[:-1]
            current = pieces[-1]
        lines.append(current)
    return lines


class CompactCanvas(Canvas):
    """A canvas that compresses each page's content when the page is finished. reportlab keeps
    every page until the file is saved, as text until then; compressed at once, a page of the
    evidence table weighs a few KiB instead of tens."""

    def showPage(self) -> None:
        super().showPage()
        page = self._doc.Pages.pages[-1]
        if page.stream and not page.Contents:
            flate = PDFDictionary({"Filter": PDFArray([PDFName("FlateDecode")])})
            page.Contents = PDFStream(flate, zlib.compress(page.stream.encode("utf-8")))
            page.stream = None


class ReportDocument(BaseDocTemplate):
    """Pages with the case's running header and a footer naming the report, its generator and
    'page N of M' (M is a form drawn once the last page is known)."""

    def __init__(self, out: IO[bytes], case: Case, report: Report) -> None:
        super().__init__(
            out,
            pagesize=A4,
            leftMargin=MARGIN,
            rightMargin=MARGIN,
            topMargin=MARGIN + 6 * mm,
            bottomMargin=MARGIN + 6 * mm,
            title=f"Evidence report: case {case.pk}, {case.title}",
            author=report.generated_by.get_username(),
            subject=f"AuditWeb report {report.pk} of case {case.pk}",
            creator="AuditWeb",
            pageCompression=1,
        )
        self.case, self.report = case, report
        frame = Frame(self.leftMargin, self.bottomMargin, self.width, self.height, id="body", **NO_PADDING)
        # The evidence pages draw the table's column heads themselves (above a shorter frame), so
        # the rows, made a chunk at a time, read as one table with its heads on every page.
        heads = Frame(
            self.leftMargin,
            self.bottomMargin,
            self.width,
            self.height - EVIDENCE_HEAD_H,
            id="rows",
            **NO_PADDING,
        )
        first = Frame(
            self.leftMargin,
            self.bottomMargin,
            self.width,
            self.height - EVIDENCE_INTRO_H - EVIDENCE_HEAD_H,
            id="rows-first",
            **NO_PADDING,
        )
        self.addPageTemplates(
            [
                PageTemplate(id="first", frames=[frame], onPage=self._decorate),
                PageTemplate(id="later", frames=[frame], onPage=self._decorate),
                PageTemplate(
                    id="evidence-first",
                    frames=[first],
                    onPage=self._evidence_page,
                    autoNextPageTemplate="evidence",
                ),
                PageTemplate(id="evidence", frames=[heads], onPage=self._evidence_page),
            ]
        )
        self.pages = 0

    def _decorate(self, canv: Any, doc: Any) -> None:
        self.pages = doc.page
        canv.saveState()
        if doc.page > 1:
            canv.setFont("Helvetica-Bold", 7.5)
            canv.setFillColor(NAVY)
            title = _clip(f"Case #{self.case.pk}: {self.case.title}", 90)
            canv.drawString(MARGIN, PAGE_H - MARGIN, f"AuditWeb evidence report · {title}")
            canv.setFont("Helvetica", 7.5)
            canv.drawRightString(PAGE_W - MARGIN, PAGE_H - MARGIN, f"Report #{self.report.pk}")
            canv.setStrokeColor(RULE)
            canv.line(MARGIN, PAGE_H - MARGIN - 3, PAGE_W - MARGIN, PAGE_H - MARGIN - 3)
        canv.setStrokeColor(RULE)
        canv.line(MARGIN, MARGIN + 9, PAGE_W - MARGIN, MARGIN + 9)
        canv.setFillColor(MUTED)
        canv.setFont("Helvetica", 7)
        who = _clip(self.report.generated_by.get_username(), 40)
        canv.drawString(
            MARGIN,
            MARGIN + 1,
            f"Report #{self.report.pk} of case #{self.case.pk}"
            f" · generated {utc(self.report.requested_at, False)}"
            f" by {who} · AuditWeb",
        )
        canv.drawString(
            MARGIN,
            MARGIN - 8,
            "This file's SHA-256 is recorded by AuditWeb: check a copy with "
            "manage.py verify_evidence --report FILE",
        )
        label = f"Page {doc.page} of "
        canv.setFont("Helvetica-Bold", 7.5)
        canv.setFillColor(INK)
        right = PAGE_W - MARGIN - 18
        canv.drawRightString(right, MARGIN + 1, label)
        canv.translate(right + 1.5, MARGIN + 1)
        canv.doForm("page-total")
        canv.restoreState()

    def _evidence_page(self, canv: Any, doc: Any) -> None:
        self._decorate(canv, doc)
        top = PAGE_H - self.topMargin
        if doc.pageTemplate.id == "evidence-first":
            canv.saveState()
            canv.setFont("Helvetica-Bold", 13)
            canv.setFillColor(NAVY)
            canv.drawString(MARGIN, top - 14, "4. The evidence")
            intro = Paragraph(EVIDENCE_INTRO, STYLES["small"])
            _, height = intro.wrapOn(canv, BODY_W, EVIDENCE_INTRO_H)
            intro.drawOn(canv, MARGIN, top - 22 - height)
            canv.restoreState()
            top -= EVIDENCE_INTRO_H
        heads = _table([_heads(*EVIDENCE_HEADS)], EVIDENCE_WIDTHS, header=True)
        _, height = heads.wrapOn(canv, BODY_W, EVIDENCE_HEAD_H)
        heads.drawOn(canv, MARGIN, top - height)

    def _endBuild(self) -> None:
        self._doSave = 0
        super()._endBuild()
        canv = self.canv
        canv.beginForm("page-total")
        canv.setFont("Helvetica-Bold", 7.5)
        canv.setFillColor(INK)
        canv.drawString(0, 0, str(self.pages))
        canv.endForm()
        canv.save()


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _table(rows: list[list[Any]], widths: list[float], header: bool = True, **kw: Any) -> Table:
    table = Table(rows, colWidths=widths, repeatRows=1 if header else 0, **kw)
    style = [
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LEFTPADDING", (0, 0), (-1, -1), 4),
        ("RIGHTPADDING", (0, 0), (-1, -1), 4),
        ("TOPPADDING", (0, 0), (-1, -1), 2.5),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 2.5),
        ("LINEBELOW", (0, 0), (-1, -1), 0.4, RULE),
    ]
    if header:
        style += [("BACKGROUND", (0, 0), (-1, 0), NAVY), ("LINEBELOW", (0, 0), (-1, 0), 0.8, NAVY)]
    table.setStyle(TableStyle(style))
    return table


def _heads(*names: str) -> list[Paragraph]:
    return [Paragraph(esc(n), STYLES["head"]) for n in names]


def _p(text: str, style: str = "cell") -> Paragraph:
    return Paragraph(text, STYLES[style])


# -- the first pages ------------------------------------------------------------------------


def notes_section(case: Case) -> list[Flowable]:
    flow: list[Flowable] = [Paragraph("2. The case as described, and the analysts' notes", STYLES["h1"])]
    if case.description:
        flow += [_p(esc(case.description), "body"), Spacer(1, 4)]
    found = content.notes(case)
    if not found:
        return [*flow, _p("No notes were written.", "body")]
    rows = [_heads("Written (UTC)", "By", "Note")]
    for note in found:
        rows.append(
            [
                _p(esc(utc(note.created_at, False))),
                TextLines([(note.author.get_username(), "Helvetica", 8, INK)]),
                _p(esc(note.text)),
            ]
        )
    return [*flow, _table(rows, [34 * mm, 26 * mm, BODY_W - 60 * mm])]


def gaps_section(case: Case) -> list[Flowable]:
    start, end = content.case_window(case)
    flow: list[Flowable] = [
        Paragraph("3. Gaps in the logs over the case's window", STYLES["h1"]),
        _p(
            "Time in which a server's log shows it recorded nothing (logging off, a restart, the clock going "
            "back), or records missing from it by its own counter. The absence of evidence in a gap is not "
            "evidence of absence.",
            "small",
        ),
    ]
    listed = content.gaps(case)
    if not listed.rows:
        text = f"No gap is known between {utc(start)} and {utc(end)}."
        return [*flow, Spacer(1, 3), _p(esc(text), "body")]
    rows = [_heads("Server", "From (UTC)", "To (UTC)", "Reason, as the log shows it", "Shown by")]
    for g in listed.rows:
        rows.append(
            [
                TextLines([(g.server, "Helvetica", 8, INK)]),
                _p(esc(utc(g.started_at))),
                _p(esc(utc(g.ended_at) if g.ended_at else "still open")),
                TextLines([(gap_reason(g.get_reason_display(), g.detail), "Helvetica", 8, INK)]),
                TextLines(
                    [
                        (g.source_file.path, "Courier", 6.6, MUTED),
                        (f"line {g.line}, offset {g.byte_offset}", "Courier", 6.6, MUTED),
                    ]
                ),
            ]
        )
    flow += [Spacer(1, 3), _table(rows, [26 * mm, 25 * mm, 25 * mm, 52 * mm, BODY_W - 128 * mm])]
    if listed.more:
        flow.append(_p(f"… and {listed.more:,} more gaps (all are in the JSON report).", "small"))
    return flow


# -- the evidence table ---------------------------------------------------------------------

EVIDENCE_WIDTHS = [9 * mm, 44 * mm, BODY_W - 53 * mm]
EVIDENCE_HEADS = ("No.", "Time (UTC) · account · session", "Statement · source file, line, offset · hashes")
EVIDENCE_HEAD_H = 15  # points: the column heads drawn on each evidence page
EVIDENCE_INTRO_H = 70  # points: the section's title and introduction on its first page
EVIDENCE_INTRO = (
    "Every pinned event in time order, its statement exactly as logged: characters that do not print (or "
    "that the report's font cannot draw) are written as \\xNN or \\u{NNNN}. Destructive "
    "statements are marked red on the left; an event that differs from what was pinned, or is gone from "
    "the store, says so in red. The source file, line and byte offset locate each record in the original "
    "log; the record hash covers its server, time, position and raw bytes."
)


def evidence_cells(item: content.Item) -> list[Any]:
    pin, e = item.pin, item.event
    note = []
    if pin.note:
        note = [
            _p(
                f"<b>Note</b> ({esc(pin.pinned_by.get_username())}, {utc(pin.pinned_at, False)}): "
                f"{esc(pin.note)}",
                "note",
            )
        ]
    if e is None:
        what = [
            _p(
                f"MISSING: event {pin.event_id}, pinned with record hash "
                f"{bytes(pin.event_record_hash).hex()}, "
                "is no longer in the store.",
                "warn",
            ),
            *note,
        ]
        return [str(item.number), _p(esc(utc(pin.event_occurred_at).removesuffix(" UTC"))), what]
    who = f"{e.user}@{e.host if e.host is not None else '?'}" if e.user is not None else "unknown account"
    if e.ip and e.ip != e.host:
        who += f" ({e.ip})"
    known = ATTRIBUTION_SHORT.get(e.attribution, "attribution not recorded")
    left = TextLines(
        [
            (utc(e.occurred_at).removesuffix(" UTC"), "Helvetica-Bold", 8, INK),
            (who, "Helvetica", 8, INK),
            (known, "Helvetica", 7, DANGER if e.attribution == "inferred_reopen" else MUTED),
            *([(f"routine runs as {e.definer}", "Helvetica", 7, MUTED)] if e.definer else []),
            *([(f"database {e.database}", "Helvetica", 8, MUTED)] if e.database else []),
            (f"session {e.session.key}", "Courier", 6.2, MUTED),
        ]
    )
    head = e.statement_type or e.command
    if e.destructive:
        head += " · destructive"
    for extra in (", ".join(e.flags), f"{e.rows_affected:,} rows" if e.rows_affected is not None else "",
                  f"error {e.status}" if e.status not in (None, "ok") else ""):  # fmt: skip
        if extra:
            head += " · " + extra
    head_line = TextLines([(head, "Helvetica-Bold", 8, DANGER if e.destructive else INK)])
    sql = e.sql
    cut = ""
    if len(sql) > SQL_SHOWN_MAX:
        cut = (
            f"\n… {len(sql) - SQL_SHOWN_MAX:,} more characters (the whole statement is in the JSON "
            "report and on the event's page)"
        )
        sql = sql[:SQL_SHOWN_MAX]
    prov = (
        f"{e.source_file.path} line {e.line}, offset {e.byte_offset}\n"
        f"file SHA-256 {e.source_file.sha256 or '(file still being read)'}\n"
        f"event {e.id} · record hash {bytes(e.record_hash).hex()}"
    )
    right: list[Flowable] = [
        head_line,
        MonoBlock(printable_latin1(sql) + cut, size=7.5, leading=9.2, back=SQL_BACK, space=(2, 3)),
        MonoBlock(printable_latin1(prov), size=6.6, leading=8.3, color=MUTED),
    ]
    if item.rows is not None:
        right += rows_flowables(item.rows, e.id)
    if item.integrity != content.AS_PINNED:
        right.append(
            _p(
                f"CHANGED SINCE PINNED: pinned with time {esc(utc(pin.event_occurred_at))} and record "
                f"hash {bytes(pin.event_record_hash).hex()}",
                "warn",
            )
        )
    return [str(item.number), left, [*right, *note]]


ROW_VALUE_SHOWN = 120  # characters of one value in the PDF (the JSON report and the API have it whole)


def _value(value: Any) -> str:
    if value is None:
        return "NULL"
    text = "base64 " + str(next(iter(value.values()), "")) if isinstance(value, dict) else str(value)
    return text if len(text) <= ROW_VALUE_SHOWN else text[:ROW_VALUE_SHOWN] + "..."


def row_lines(row: dict[str, Any]) -> list[str]:
    """One binlog row as text: its change and table, then a line per column; an UPDATE's changed
    columns marked * with before -> after."""
    before, after = row["before"], row["after"]
    lines = [f"{row['change']} {row['table']}"]
    for column in before or after or {}:
        if before is not None and after is not None:
            old, new = before.get(column), after.get(column)
            if old != new:
                lines.append(f" * {column}: {_value(old)} -> {_value(new)}")
            else:
                lines.append(f"   {column}: {_value(old)}")
        else:
            lines.append(f"   {column}: {_value((before or after or {}).get(column))}")
    return lines


def rows_flowables(rows: content.EventRows, event_id: int) -> list[Flowable]:
    """The rows an event changed, from the binary log: the join's confidence and evidence, the
    first rows (before and after by column), and how many more the API has."""
    if rows.sure:
        head = f"Rows from the binary log: {rows.total:,} · linked by {rows.confidence}"
    elif rows.confidence == "ambiguous":
        head = (
            f"Rows from the binary log: {rows.total:,} · AMBIGUOUS: this statement's or another's, not fact"
        )
    else:
        head = (
            f"Rows from the binary log: {rows.total:,} · {rows.confidence}: possibly its routine's, not fact"
        )
    flow: list[Flowable] = [TextLines([(head, "Helvetica-Bold", 7.5, INK if rows.sure else DANGER)])]
    if rows.evidence:
        flow.append(MonoBlock(printable_latin1("; ".join(rows.evidence)), size=6.4, leading=8, color=MUTED))
    if rows.error:
        flow.append(_p(esc(f"The rows cannot be read: {rows.error}"), "warn"))
    lines = [line for row in rows.rows for line in row_lines(row)]
    if lines:
        text = printable_latin1("\n".join(lines))
        flow.append(MonoBlock(text, size=6.6, leading=8.2, back=SQL_BACK, space=(2, 2)))
    if rows.more:
        flow.append(_p(esc(rows.more_note(event_id)), "note"))
    return flow


def evidence_tables(
    case: Case, progress: Callable[[int], None], integrity: dict[str, int]
) -> Iterator[Flowable]:
    """The evidence table, one Table flowable per event (the page template draws the column
    heads): a row that does not fit goes whole to the next page, measured once more there, where
    rows of a shared table would all be measured again at each page break. Only a row too tall
    for any page (a very long statement) is split inside."""
    for item in content.evidence_items(case):
        integrity[item.integrity] = integrity.get(item.integrity, 0) + 1
        long = item.event is not None and len(item.event.sql) > SPLIT_ROW_AT
        table = _table([evidence_cells(item)], EVIDENCE_WIDTHS, header=False, splitInRow=1 if long else 0)
        style = [("BACKGROUND", (0, 0), (0, 0), SHADE), ("ALIGN", (0, 0), (0, 0), "RIGHT"),
                 ("FONT", (0, 0), (0, 0), "Helvetica", 8)]  # fmt: skip
        if item.event is not None and item.event.destructive:
            style.append(("LINEBEFORE", (0, 0), (0, 0), 2.5, DANGER))
        table.setStyle(TableStyle(style))
        progress(item.number)
        yield table


# -- the appendix ---------------------------------------------------------------------------


def custody_appendix(case: Case, integrity: dict[str, int], heads: ChainHeads) -> list[Flowable]:
    flow: list[Flowable] = [
        Paragraph("Appendix A. Chain of custody", STYLES["h1"]),
        _p(
            "Each pinned event keeps the file, line and byte offset it was read from and its record hash (of "
            "its server, time, position and raw bytes). The files below were hashed with SHA-256 as AuditWeb "
            "read them; the runs are the ingestions that read them.",
            "small",
        ),
        Paragraph("Pinned events against the store", STYLES["h2"]),
    ]
    counts = [f"{n:,} {state}" for state, n in sorted(integrity.items())] or ["none"]
    flow.append(
        _p(
            esc("; ".join(counts)) + ". (Time and record hash as pinned compared with the stored "
            "event; manage.py verify_evidence also re-reads the original files.)",
            "body",
        )
    )
    flow.append(Paragraph("Chain heads", STYLES["h2"]))
    head_lines = [
        (f"Evidence digest of the {heads.pins:,} pins: {heads.evidence_digest}", "Courier", 6.8, INK)
    ]
    head_lines += [
        (f"Source {name}: link {seq:,}, {digest}", "Courier", 6.8, INK) for name, seq, digest in heads.sources
    ]
    flow += [
        _p(
            "The evidence digest is the SHA-256 of the case's pins (event id, time and record hash as "
            "pinned, in event id order); each source's head is the newest link of its custody chain over "
            f"the stored events. manage.py verify_evidence --case {case.pk} prints both now: the same "
            "values mean the same evidence.",
            "small",
        ),
        TextLines(head_lines),
    ]
    files = content.source_files(case)
    flow.append(Paragraph("Source files", STYLES["h2"]))
    rows = [_heads("File", "Server", "Size (bytes)", "SHA-256 · first read · last read")]
    for f in files.rows:
        state = "" if f.bytes_read >= f.size else f" (of the first {f.bytes_read:,} bytes, read so far)"
        rows.append(
            [
                TextLines([(f.path, "Courier", 6.6, MUTED)]),
                TextLines([(f.source.server, "Helvetica", 8, INK)]),
                _p(f"{f.size:,}", "num"),
                _p(
                    esc(f"{f.sha256 or 'not yet complete'}{state}")
                    + "<br/>"
                    + esc(f"{utc(f.first_seen_at, False)} · {utc(f.last_read_at, False)}"),
                    "prov",
                ),
            ]
        )
    flow.append(_table(rows, [56 * mm, 22 * mm, 20 * mm, BODY_W - 98 * mm]))
    if files.more:
        flow.append(_p(f"… and {files.more:,} more files (all are in the JSON report).", "small"))
    runs = content.ingest_runs(case)
    flow.append(Paragraph("Ingest runs", STYLES["h2"]))
    rows = [_heads("Run", "File read", "Started (UTC)", "Finished (UTC)", "Status", "Events stored")]
    for r in runs.rows:
        rows.append(
            [
                _p(str(r.pk), "num"),
                TextLines([(r.source_file.path if r.source_file else r.source.name, "Courier", 6.6, MUTED)]),
                _p(esc(utc(r.started_at, False))),
                _p(esc(utc(r.finished_at, False) if r.finished_at else "-")),
                _p(esc(r.status)),
                _p(f"{r.events_stored:,}", "num"),
            ]
        )
    flow.append(_table(rows, [12 * mm, BODY_W - 124 * mm, 32 * mm, 32 * mm, 18 * mm, 30 * mm]))
    if runs.more:
        flow.append(_p(f"… and {runs.more:,} more runs (all are in the JSON report).", "small"))
    filters = content.saved_filters(case)
    if filters:
        flow.append(Paragraph("Saved explorer searches", STYLES["h2"]))
        rows = [_heads("Name", "Explorer query")]
        rows += [[_p(esc(f.name)), _p(esc(f.query), "prov")] for f in filters]
        flow.append(_table(rows, [50 * mm, BODY_W - 50 * mm]))
    return flow
