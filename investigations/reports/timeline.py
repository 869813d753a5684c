"""The report's timeline: which bin to count events in, and how to label it. Pure: no Django.

A case may be about one second (a script's burst of statements) or a week (a slow exfiltration),
so the bin is chosen from the span: the smallest of a fixed ladder of round widths (1 ms up to a
week) that keeps the chart within MAX_BINS bars. Bins are aligned on round times (a 100 ms bin
starts at .000, .100...; an hour at :00), and the axis labels carry just enough of the time to
differ from each other, so that a reader never sees six identical labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MAX_BINS = 60  # bars the chart holds at most (A4 body width: a bar of 2.5 mm or more)
MAX_LABELS = 8  # axis labels at most


@dataclass(frozen=True)
class Bin:
    width: timedelta
    unit: str  # what one bar counts, for "events per ..." ("100 ms", "second", "hour", "day")
    label_format: str  # strftime of an axis label (".%f" is cut to the bin's precision)
    decimals: int = 0  # digits of the second shown after the point, for sub-second bins


LADDER = (
    Bin(timedelta(milliseconds=1), "millisecond", "%H:%M:%S.%f", 3),
    Bin(timedelta(milliseconds=10), "10 ms", "%H:%M:%S.%f", 2),
    Bin(timedelta(milliseconds=100), "100 ms", "%H:%M:%S.%f", 1),
    Bin(timedelta(seconds=1), "second", "%H:%M:%S"),
    Bin(timedelta(seconds=10), "10 seconds", "%H:%M:%S"),
    Bin(timedelta(minutes=1), "minute", "%H:%M"),
    Bin(timedelta(minutes=10), "10 minutes", "%H:%M"),
    Bin(timedelta(hours=1), "hour", "%m-%d %H:%M"),
    Bin(timedelta(hours=6), "6 hours", "%m-%d %H:%M"),
    Bin(timedelta(days=1), "day", "%Y-%m-%d"),
    Bin(timedelta(days=7), "week", "%Y-%m-%d"),
)
EPOCH = datetime(1970, 1, 5, tzinfo=UTC)  # a Monday: weekly bins start on Mondays


def choose_bin(span: timedelta, max_bins: int = MAX_BINS) -> Bin:
    """The narrowest bin of the ladder in which `span` takes at most `max_bins` bars (the widest
    one for longer spans; a bin is never narrower than a millisecond)."""
    for candidate in LADDER:
        if span <= candidate.width * max_bins:
            return candidate
    return LADDER[-1]


def bin_start(when: datetime, b: Bin) -> datetime:
    """The start of the bin holding `when` (bins aligned on round UTC times)."""
    when = when.astimezone(UTC)
    step = _micros(b.width)
    return EPOCH + timedelta(microseconds=(_micros(when - EPOCH) // step) * step)


def bin_starts(start: datetime, end: datetime, b: Bin) -> list[datetime]:
    """The starts of the bins covering [start, end], in order (at least one)."""
    first, last = bin_start(start, b), bin_start(max(start, end), b)
    if last == end and end > first:  # a window ending on a bin's start does not take that bin
        last -= b.width
    count = _micros(last - first) // _micros(b.width) + 1
    return [first + i * b.width for i in range(count)]


def bin_index(when: datetime, first: datetime, b: Bin) -> int:
    """Which bar (from the one starting at `first`) counts an event at `when`."""
    return _micros(when.astimezone(UTC) - first) // _micros(b.width)


def label(when: datetime, b: Bin) -> str:
    """An axis label: the bin's start in UTC, to the bin's precision."""
    text = when.astimezone(UTC).strftime(b.label_format)
    if b.decimals:
        text = text[: len(text) - (6 - b.decimals)]
    return text


def labels(starts: list[datetime], b: Bin, most: int = MAX_LABELS) -> list[str]:
    """A label for every k-th bar (k chosen to print at most `most`), empty for the others; the
    labels printed all differ (a day is added when the bars cross midnight at hour precision)."""
    every = max(1, -(-len(starts) // most))
    shown = [label(s, b) if i % every == 0 else "" for i, s in enumerate(starts)]
    printed = [s for s in shown if s]
    if len(set(printed)) < len(printed):  # e.g. minutes of two days: say the day as well
        fmt = "%m-%d " + b.label_format
        wider = Bin(b.width, b.unit, fmt, b.decimals)
        shown = [label(s, wider) if i % every == 0 else "" for i, s in enumerate(starts)]
    return shown


def per_unit(b: Bin) -> str:
    """The chart's caption of what a bar counts: "events per 100 ms", "events per hour"."""
    return f"events per {b.unit}"


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
