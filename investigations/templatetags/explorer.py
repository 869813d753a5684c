"""Template helpers for the explorer's table: sortable column headers and statement-type colours."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from investigations.views.palette import badge_class

register = template.Library()

_ARIA = {"": "ascending", "-": "descending"}


@register.simple_tag(takes_context=True)
def sort_header(context: template.Context, key: str, label: str) -> SafeString:
    """A column header that sorts the explorer by `key` (`sort` of the one filter), keeping the
    other filters; a second click turns the order round. Without `sortable` in the context it is
    a plain header (the same table on other pages). The time column names the page's zone."""
    extra = f" ({timezone.get_current_timezone_name()})" if key == "time" else ""
    if not context.get("sortable"):
        return format_html('<th scope="col">{}{}</th>', label, extra)
    current = context.get("sort") or "-time"
    params: QueryDict = context["params"].copy()
    params.pop("cursor", None)
    if current.lstrip("-") == key:
        sign = "" if current.startswith("-") else "-"
        aria, arrow = _ARIA["-" if current.startswith("-") else ""], "▼" if current.startswith("-") else "▲"
    else:
        sign = "-" if key in ("time", "rows") else ""  # newest, biggest first; text columns A to Z
        aria, arrow = "none", ""
    params["sort"] = f"{sign}{key}"
    if params["sort"] == "-time":
        params.pop("sort")
    query = params.urlencode()
    return format_html(
        '<th scope="col" aria-sort="{}"><a class="sort" href="?{}" hx-get="?{}" hx-target="#results" '
        'hx-push-url="true" title="Sort by {}">{}{}<span class="arrow" aria-hidden="true">{}</span></a></th>',
        aria,
        query,
        query,
        label.lower(),
        label,
        extra,
        arrow,
    )


@register.filter
def type_badge(statement_type: str, destructive: bool = False) -> str:
    """The CSS classes of a statement type's badge: its colour from the one palette."""
    return badge_class(statement_type, bool(destructive))


PRECISION_WORDS = {0: "to the second", 3: "to the millisecond", 6: "to the microsecond"}


def _clock(when: datetime, digits: int) -> str:
    shown = when.strftime("%Y-%m-%d %H:%M:%S")
    return shown + ("." + f"{when.microsecond:06d}"[:digits] if digits else "")


@register.simple_tag
def logged_time(when: datetime | None, digits: int | None) -> SafeString:
    """An event's time once in the page's zone (with its abbreviation), and once in UTC when the
    page's zone is another, each to the log's own precision (`digits` after the seconds; None:
    not known, all six shown)."""
    if when is None:
        return format_html('<span class="unknown">{}</span>', "unknown: the log never said when")
    shown_digits = 6 if digits is None else digits
    local, utc = timezone.localtime(when), when.astimezone(UTC)
    zone = timezone.get_current_timezone_name()
    words = (
        PRECISION_WORDS.get(digits, f"to {digits} digits after the second") if digits is not None else None
    )
    note = f"as the log wrote it, {words}" if words else "the log's precision is not known: as stored"
    iso = utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if local.utcoffset() == utc.utcoffset() and zone in ("UTC", "Etc/UTC", "GMT", "Etc/GMT"):
        return format_html(
            '<time datetime="{}">{} UTC</time> <span class="hint">({})</span>',
            iso,
            _clock(utc, shown_digits),
            note,
        )
    return format_html(
        '<time datetime="{}">{} {}</time> <span class="hint">({}; {})</span><br>'
        '<span class="mono">{} UTC</span>',
        iso,
        _clock(local, shown_digits),
        local.tzname() or "",
        zone,
        note,
        _clock(utc, shown_digits),
    )


@register.simple_tag
def moment_at(when: datetime | None, digits: int | None) -> SafeString:
    """A time in the page's zone with its abbreviation, to `digits` after the second (None: six),
    its UTC instant on hover: for a second time on a page that knows the log's precision."""
    if when is None:
        return format_html('<span class="unknown">{}</span>', "unknown")
    local, utc = timezone.localtime(when), when.astimezone(UTC)
    shown_digits = 6 if digits is None else digits
    return format_html(
        '<time datetime="{}" title="{} UTC">{} {}</time>',
        utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        _clock(utc, shown_digits),
        _clock(local, shown_digits),
        local.tzname() or "",
    )
