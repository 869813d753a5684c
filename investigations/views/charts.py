"""The explorer's timeline as data for Chart.js (passed with json_script, drawn by auditweb.js)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from investigations.query.timeline import Timeline
from investigations.views.palette import series_colours


def _local(when: datetime, fmt: str) -> str:
    return timezone.localtime(when).strftime(fmt)


def width_text(width: timedelta) -> str:
    seconds = int(width.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def label_format(width: timedelta) -> str:
    if width < timedelta(minutes=1):
        return "%H:%M:%S"
    if width < timedelta(days=1):
        return "%m-%d %H:%M"
    return "%Y-%m-%d"


def chart_data(tl: Timeline, one_server: bool) -> dict[str, object]:
    """Labels and counts per bucket, each bucket's From/Until as the form's inputs want them (the
    page's zone), which buckets gaps cover, and each series' colour from the one palette
    (`views.palette`). A gap hatches the whole height over one server's chart, a band on top over
    several servers'. All of it is data for json_script (docs/architecture.md, "Hostile text")."""
    fmt = label_format(tl.width)
    ends = [*tl.starts[1:], tl.end]
    gaps = []
    for gap in tl.gaps:
        first = max(0, int((gap.started_at - tl.starts[0]) / tl.width))
        last_at = gap.ended_at or tl.end
        last = min(len(tl.starts) - 1, int((last_at - tl.starts[0]) / tl.width))
        gaps.append({"first": first, "last": last, "server": gap.server})
    return {
        "labels": [_local(s, fmt) for s in tl.starts],
        "from": [_local(s, "%Y-%m-%dT%H:%M:%S") for s in tl.starts],
        "until": [_local(e, "%Y-%m-%dT%H:%M:%S") for e in ends],
        "width": width_text(tl.width),
        "series": [
            {"label": s.label, "destructive": s.destructive, "data": s.counts, "colour": colour}
            for s, colour in zip(
                tl.series, series_colours([(s.label, s.destructive) for s in tl.series]), strict=True
            )
        ],
        "gaps": gaps,
        "gaps_full_height": one_server,
    }


def bucket_rows(tl: Timeline) -> list[dict[str, object]]:
    """The chart as rows, for the table under it (keyboard and screen readers, no JavaScript)."""
    rows = []
    ends = [*tl.starts[1:], tl.end]
    for i, (start, end) in enumerate(zip(tl.starts, ends, strict=True)):
        total = sum(s.counts[i] for s in tl.series)
        destructive = sum(s.counts[i] for s in tl.series if s.destructive)
        if total:
            rows.append({"start": start, "end": end, "total": total, "destructive": destructive})
    return rows
