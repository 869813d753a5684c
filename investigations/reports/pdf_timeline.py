"""The PDF's timeline chart: pinned events per bin over the case's window, over all that the
case's servers logged, with the gaps in the logs drawn across it.

Pinned events are bars on the left scale (destructive ones red, stacked); everything logged is a
grey area on its own right-hand scale, so a handful of pinned statements stay visible beside a
busy server's thousands. The bin is chosen from the span (investigations.reports.timeline), and
the caption says what one bar counts ("events per 100 ms", "per hour").
"""

from __future__ import annotations

import math
from datetime import datetime

from reportlab.graphics.shapes import Drawing, Line, Polygon, Rect, String
from reportlab.lib import colors
from reportlab.lib.units import mm
from reportlab.platypus import Flowable

from investigations.reports import facts
from investigations.reports.pdf_report import BODY_W, DANGER, INK, MUTED, NAVY, OTHER_BAR, RULE, _p, esc, utc
from investigations.reports.timeline import labels, per_unit

LOGGED = colors.HexColor("#dfe5ec")
LOGGED_LINE = colors.HexColor("#9aa8b7")
GAP = colors.HexColor("#f0a202")
HEIGHT = 66 * mm
SHARED_SCALE_RATIO = 10  # all logged at most this many times the pinned: one scale for both
LEFT, RIGHT, BOTTOM, TOP = 30.0, 34.0, 34.0, 14.0


def nice_max(value: int) -> int:
    """The top of a scale: 1, 2 or 5 times a power of ten, at least `value` (and at least 2)."""
    if value <= 2:
        return 2
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def timeline_flowables(t: facts.Timeline | None) -> list[Flowable]:
    if t is None:
        return [_p("No pinned event has a known time, and the case has no window.", "small")]
    return [timeline_drawing(t)]


def timeline_drawing(t: facts.Timeline) -> Drawing:
    d = Drawing(BODY_W, HEIGHT)
    x0, y0 = LEFT, BOTTOM
    width, height = BODY_W - LEFT - RIGHT, HEIGHT - BOTTOM - TOP
    n = len(t.starts)
    slot = width / n
    chart_start, chart_end = t.starts[0], t.starts[-1] + t.bin.width
    span_us = (chart_end - chart_start).total_seconds()

    def x_of(when: datetime) -> float:
        seconds = (when - chart_start).total_seconds()
        return x0 + width * min(max(seconds / span_us, 0.0), 1.0)

    pinned = [a + b for a, b in zip(t.pinned_destructive, t.pinned_other, strict=True)]
    most_pinned, most_logged = max(pinned, default=0), max(t.logged, default=0)
    # One scale for both while the pinned bars stay readable beside all that was logged; a busy
    # server's counts get their own right-hand scale.
    shared = most_logged <= SHARED_SCALE_RATIO * max(most_pinned, 1)
    left_top = nice_max(max(most_pinned, most_logged) if shared else most_pinned)
    right_top = left_top if shared else nice_max(most_logged)

    # everything the servers logged: a grey step area on the right-hand scale
    if any(t.logged):
        points: list[float] = [x0, y0]
        for i, count in enumerate(t.logged):
            y = y0 + height * count / right_top
            points += [x0 + i * slot, y, x0 + (i + 1) * slot, y]
        points += [x0 + width, y0]
        d.add(Polygon(points, strokeColor=LOGGED_LINE, strokeWidth=0.5, fillColor=LOGGED))
    # gaps: amber bands (at least a hairline wide), drawn before the bars so the bars stay readable
    for g_start, g_end, _reason in t.gaps:
        left = x_of(g_start) if g_start is not None else x0
        right = x_of(g_end) if g_end is not None else x0 + width
        right = max(right, left + 1.2)
        d.add(Rect(left, y0, right - left, height, fillColor=GAP, fillOpacity=0.35, strokeColor=None))
        d.add(Line(left, y0, left, y0 + height, strokeColor=GAP, strokeWidth=0.6))
    # pinned events: bars on the left scale, destructive ones at the bottom in red
    bar = slot * 0.7 if n > 1 else min(slot, 40)
    for i in range(n):
        left = x0 + i * slot + (slot - bar) / 2
        red = height * t.pinned_destructive[i] / left_top
        grey = height * t.pinned_other[i] / left_top
        if red:
            d.add(Rect(left, y0, bar, red, fillColor=DANGER, strokeColor=None))
        if grey:
            d.add(Rect(left, y0 + red, bar, grey, fillColor=OTHER_BAR, strokeColor=None))
    _axes(d, x0, y0, width, height, left_top, right_top, any(t.logged) and not shared)
    # the axis labels: every k-th bin, each different, centred under its bin's start
    for i, text in enumerate(labels(t.starts, t.bin)):
        if text:
            x = x0 + i * slot
            d.add(Line(x, y0, x, y0 - 3, strokeColor=INK, strokeWidth=0.5))
            d.add(
                String(
                    x, y0 - 11, text, fontName="Helvetica", fontSize=6.5, fillColor=INK, textAnchor="middle"
                )
            )
    unit = per_unit(t.bin)
    heading = ("Events" if shared else "Pinned events") + unit.removeprefix("events")
    d.add(String(x0, HEIGHT - 9, heading, fontName="Helvetica-Bold", fontSize=7, fillColor=NAVY))
    if any(t.logged) and not shared:
        d.add(
            String(
                x0 + width, HEIGHT - 9, f"all logged {unit} (right scale)", fontName="Helvetica", fontSize=7,
                fillColor=MUTED, textAnchor="end",
            )
        )  # fmt: skip
    caption = f"UTC, {utc(chart_start, True)} to {utc(chart_end, True)}"
    d.add(String(x0, y0 - 21, caption, fontName="Helvetica", fontSize=6.8, fillColor=MUTED))
    _legend(d, x0, 4, bool(t.gaps))
    return d


def _axes(d: Drawing, x0: float, y0: float, width: float, height: float, left_top: int, right_top: int,
          logged: bool) -> None:  # fmt: skip
    d.add(Line(x0, y0, x0 + width, y0, strokeColor=INK, strokeWidth=0.7))
    d.add(Line(x0, y0, x0, y0 + height, strokeColor=INK, strokeWidth=0.5))
    for fraction in (0.0, 0.5, 1.0):
        y = y0 + height * fraction
        if fraction:
            d.add(Line(x0, y, x0 + width, y, strokeColor=RULE, strokeWidth=0.3))
        value = left_top * fraction
        text = f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"
        d.add(
            String(x0 - 3, y - 2.3, text, fontName="Helvetica", fontSize=6.5, fillColor=INK, textAnchor="end")
        )
        if logged:
            value = right_top * fraction
            text = f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"
            d.add(String(x0 + width + 3, y - 2.3, text, fontName="Helvetica", fontSize=6.5, fillColor=MUTED))


def _legend(d: Drawing, x: float, y: float, gaps: bool) -> None:
    entries = [(DANGER, 1.0, "pinned, destructive"), (OTHER_BAR, 1.0, "pinned, other"),
               (LOGGED, 1.0, "all logged by the case's servers")]  # fmt: skip
    if gaps:
        entries.append((GAP, 0.5, "gap in the logs"))
    for color, opacity, text in entries:
        d.add(Rect(x, y, 7, 7, fillColor=color, fillOpacity=opacity, strokeColor=None))
        d.add(String(x + 10, y + 1, text, fontName="Helvetica", fontSize=7, fillColor=INK))
        x += 16 + len(text) * 3.4


def timeline_intro(t: facts.Timeline | None) -> list[Flowable]:
    if t is None:
        return []
    text = (
        f"One bar per {t.bin.unit} (the width chosen for the span shown: the case's window, widened to "
        "hold every pinned event). Amber bands are gaps in the logs of the case's servers: nothing was "
        "recorded there, which does not mean nothing happened."
    )
    return [_p(esc(text), "small")]
