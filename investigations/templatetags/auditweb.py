"""Template helpers for evidence: times with their zone, raw bytes made visible, SQL for reading."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import sqlparse
from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from ingest.health import human_duration

register = template.Library()

PRETTY_SQL_MAX = 20_000  # longer statements are shown as logged: formatting them would be slow
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@register.simple_tag
def moment(when: datetime | None, precision: str = "seconds") -> SafeString:
    """A time in the page's zone, marked up with its UTC instant (`datetime`, and on hover).

    precision "seconds" for dense tables, "micro" (with the zone's abbreviation) for details."""
    if when is None:
        return mark_safe('<span class="unknown">unknown</span>')
    local = timezone.localtime(when)
    utc = when.astimezone(UTC)
    if precision == "micro":
        shown = local.strftime("%Y-%m-%d %H:%M:%S.%f ") + (local.tzname() or "")
    else:
        shown = local.strftime("%Y-%m-%d %H:%M:%S")
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>',
        utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        utc.strftime("%Y-%m-%d %H:%M:%S.%f"),
        shown,
    )


@register.filter
def local_input(when: datetime | None) -> str:
    """The value of a datetime-local input: the time in the page's zone, to the second."""
    return timezone.localtime(when).strftime("%Y-%m-%dT%H:%M:%S") if when else ""


@register.filter
def before_second(when: datetime | None) -> datetime | None:
    """The second before `when` (the binlog's times are whole seconds): "just before" a statement."""
    return when - timedelta(seconds=1) if when else None


@register.filter
def raw_bytes(data: bytes | memoryview | None) -> SafeString:
    """Log bytes as text, exactly: what is not UTF-8, and control characters other than tab and
    newline, are shown as \\xNN in a marked span, so they cannot pass for the text they resemble."""
    if data is None:
        return mark_safe("")
    data = bytes(data)
    parts: list[str] = []
    while data:
        try:
            text, data = data.decode("utf-8"), b""
        except UnicodeDecodeError as e:
            text, bad, data = data[: e.start].decode("utf-8"), data[e.start : e.end], data[e.end :]
            parts.append(_visible_text(text))
            parts.append(_byte_spans(bad))
            continue
        parts.append(_visible_text(text))
    return mark_safe("".join(parts))  # every piece was escaped above


def _visible_text(text: str) -> str:
    out, last = [], 0
    for m in _CONTROL.finditer(text):
        out.append(escape(text[last : m.start()]))
        out.append(_byte_spans(m.group().encode()))
        last = m.end()
    out.append(escape(text[last:]))
    return "".join(out)


def _byte_spans(data: bytes) -> str:
    return "".join(f'<span class="byte" title="byte 0x{b:02x}">\\x{b:02x}</span>' for b in data)


@register.filter
def pretty_sql(sql: str) -> str:
    """The statement re-indented for reading (whitespace only: words and case stay as logged)."""
    if not sql or len(sql) > PRETTY_SQL_MAX:
        return sql
    try:
        return sqlparse.format(sql, reindent=True, indent_width=2).strip()
    except Exception:  # sqlparse gives up on some inputs (deep nesting): show it as logged
        return sql


@register.filter
def one_line(sql: str, length: int = 160) -> str:
    """The statement's first `length` characters with its whitespace runs as single spaces."""
    flat = " ".join(sql[: length * 4].split())
    return flat if len(flat) <= length else flat[: length - 1] + "…"


@register.filter
def is_long(sql: str, length: int = 160) -> bool:
    return len(sql) > length or "\n" in sql.strip()


@register.simple_tag
def query_with(params: QueryDict, **changes: object) -> str:
    """The query string of `params` with some parameters set (None or "" removes one)."""
    query = params.copy()
    for name, value in changes.items():
        query.pop(name, None)
        if value not in (None, ""):
            query[name] = str(value)
    return query.urlencode()


@register.filter
def thousands(n: int | None) -> str:
    return "" if n is None else f"{n:,}"


# -- times with their zone, sizes and rates in human units (the dashboard and Sources pages) -----


def _zoned(when: datetime) -> str:
    local = timezone.localtime(when)
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or local.strftime("%z"))


@register.filter
def ago(when: datetime | None) -> str:
    """How long ago (or how long until) a time is: "3 min ago", "in 45 s"."""
    if when is None:
        return ""
    seconds = (timezone.now() - when).total_seconds()
    if abs(seconds) < 1:
        return "just now"
    return f"{human_duration(seconds)} ago" if seconds > 0 else f"in {human_duration(-seconds)}"


@register.filter
def zoned(when: datetime | None, missing: str = "—") -> SafeString:
    """A time in the page's zone to the second, the zone named: "2026-11-24 17:57:03 UTC"."""
    if when is None:
        return format_html('<span class="unknown">{}</span>', missing)
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>',
        when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f"),
        _zoned(when),
    )


@register.filter
def when(when: datetime | None, missing: str = "—") -> SafeString:
    """A time with its zone and how long ago it was: "2026-11-24 17:57:03 UTC (3 min ago)"."""
    if when is None:
        return zoned(None, missing)
    return format_html('{} <span class="ago">({})</span>', zoned(when), ago(when))


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds as a person says them: 45 s, 14 min, 2.0 h."""
    return "" if seconds is None else human_duration(float(seconds))


_IEC = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


@register.filter
def iec_bytes(size: float | None) -> str:
    """Bytes in binary units, as a file manager shows them: 512 B, 121.7 KiB, 3.0 GiB."""
    if size is None:
        return ""
    value, unit = float(size), 0
    while abs(value) >= 1024 and unit < len(_IEC) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.0f} B" if unit == 0 else f"{value:.1f} {_IEC[unit]}"


@register.filter
def human_count(n: float | None, unit: str = "") -> str:
    """A count the eye takes in: 9,999, 12.3 k, 1.2 M (with its unit: "1.2 M events")."""
    if n is None:
        return ""
    value = float(n)
    if abs(value) < 10_000:
        shown = f"{value:,.0f}"
    else:
        for divisor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= divisor:
                shown = f"{value / divisor:.1f} {suffix}"
                break
    return f"{shown} {unit}" if unit else shown


@register.filter
def per_second(rate: float | None, unit: str = "bytes") -> str:
    """A rate: bytes as "121.7 KiB/s", anything else counted ("1.2 k rows/s")."""
    if rate is None:
        return ""
    if unit == "bytes":
        return f"{iec_bytes(rate)}/s"
    return f"{human_count(rate, unit)}/s"
