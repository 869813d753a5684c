"""Template helpers for pinning: which cases the listed events are pinned to, and the bar that
pins the ticked ones (its cases are the viewer's, so the views need not pass them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template

from investigations.cases import MAX_PINS_PER_REQUEST, cases_to_pin_into, pins_of
from investigations.forms import BulkPinForm
from investigations.models import Case

register = template.Library()

MARKS_SHOWN = 3  # cases named beside an event; more are counted


@register.simple_tag(takes_context=True)
def pins_for(context: template.Context, *groups: Any) -> dict[int, list[Case]]:
    """The cases each listed event is pinned to, in one query per table (groups: events, or lists
    or querysets of them, evaluated here once). Empty for a viewer, who reads no case."""
    if not context.get("may_investigate"):
        return {}
    ids: list[int] = []
    for group in groups:
        items: Iterable[Any] = (
            [group] if hasattr(group, "pk") else group
        )  # an event, or a list or query of them
        ids.extend(e.pk for e in items if getattr(e, "pk", None) is not None)
    return pins_of(ids) if ids else {}


@register.filter
def pins_of_event(pinned: dict[int, list[Case]] | None, event_id: int) -> dict[str, Any]:
    cases = (pinned or {}).get(event_id, [])
    return {"shown": cases[:MARKS_SHOWN], "more": max(0, len(cases) - MARKS_SHOWN), "count": len(cases)}


@register.inclusion_tag("investigations/_select_bar.html", takes_context=True)
def select_bar(context: template.Context, what: str = "events") -> dict[str, Any]:
    """The bar that pins the ticked events (shown to those who may pin)."""
    request = context["request"]
    may = bool(context.get("may_investigate"))
    form = None
    if may:
        form = BulkPinForm(cases=cases_to_pin_into(request.user), initial={"next": request.get_full_path()})
    return {"form": form, "may_investigate": may, "limit": MAX_PINS_PER_REQUEST, "what": what,
            "csrf_token": context.get("csrf_token")}  # fmt: skip
