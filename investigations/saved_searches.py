"""Saved searches outside cases: saved from the explorer in one click, named from their filters,
listed in the explorer (one's own, shared ones, those of one's cases), opened by address.

Who may do what (one place, used by the pages):
- anyone with the viewer role saves searches of their own and opens any search that belongs to
  no case by its address (its filters are no secret: the same viewer could type them);
- a case's saved search opens for the investigator role (who may read cases);
- its creator, an admin, and for a case's search the case's investigators change or delete it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.http import QueryDict

from investigations.cases import can_change_case
from investigations.models import SavedFilter
from investigations.query.filters import QUERY_ID, query_id
from investigations.roles import Role, has_role

NAME_MAX = 200  # SavedFilter.name
VALUE_MAX = 60  # a filter's value in a default name
QUERY_MAX = 4000  # the longest query string kept (the case page's form takes as much)
LISTED = 50  # saved searches of each kind listed in the explorer
# Parameters that are no filter: where in a listing, which view's sort, a form's token.
NOT_FILTERS = ("cursor", "range", "sort", "page", "page_size", "csrfmiddlewaretoken")
SPANS = {timedelta(hours=1): "1 h", timedelta(days=1): "24 h", timedelta(days=7): "7 days"}


def search_query(params: QueryDict) -> str:
    """The filters of `params` as a query string to keep: no paging or sorting, no empty ones."""
    kept = QueryDict(mutable=True)
    for key, values in params.lists():
        if key not in NOT_FILTERS:
            kept.setlist(key, [v for v in values if v.strip()])
    return QueryDict(kept.urlencode()).urlencode()  # (drops the emptied keys)


def _short(value: str) -> str:
    value = " ".join(value.split())
    return value if len(value) <= VALUE_MAX else value[: VALUE_MAX - 1] + "…"


def _when(text: str) -> tuple[datetime | None, str]:
    """A From/Until value as given (`2026-11-24T22:25:00`), and as a name shows it."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None, _short(text)
    shown = when.strftime("%Y-%m-%d %H:%M" + (":%S" if when.second else ""))
    return when, shown


def _time_part(params: QueryDict) -> str:
    since, until = params.get("since", "").strip(), params.get("until", "").strip()
    (start, since_shown), (end, until_shown) = _when(since), _when(until)
    zone = _short(params.get("tz", "").strip())
    zone = f" {zone}" if zone else ""
    if since and until:
        span = SPANS.get(end - start) if start and end and start.tzinfo == end.tzinfo else None
        if span:
            return f"{span} up to {until_shown}{zone}"
        return f"{since_shown} to {until_shown}{zone}"
    if since:
        return f"since {since_shown}{zone}"
    if until:
        return f"before {until_shown}{zone}"
    return ""


def default_name(params: QueryDict) -> str:
    """A name that says what the filters ask: "DELETE on shop.orders by bob, 24 h up to 2026-11-24
    22:25 UTC". Values are shortened; the whole is at most NAME_MAX characters."""

    def get(name: str) -> str:
        return params.get(name, "").strip()

    types = [t for t in params.getlist("statement_type") if t.strip()]
    what = "/".join(_short(t) for t in types[:3]) + (f" +{len(types) - 3}" if len(types) > 3 else "")
    fingerprint = get("fingerprint")
    destructive = get("destructive").lower()
    if not what:
        what = "statements" if fingerprint or destructive in ("true", "1") else "events"
    if destructive in ("true", "1"):
        what = f"destructive {what}"
    elif destructive in ("false", "0"):
        what = f"non-destructive {what}"
    if fingerprint:
        what += " like " + (fingerprint if QUERY_ID.fullmatch(fingerprint) else query_id(fingerprint))
    parts = [what[0].upper() + what[1:]]
    for name, label in (("table", "on"), ("database", "in"), ("user", "by"), ("host", "from"),
                        ("server", "on server"), ("flag", "flagged"), ("connection_id", "connection"),
                        ("session", "session")):  # fmt: skip
        if get(name):
            parts.append(f"{label} {_short(get(name))}")
    if get("q"):
        parts.append(f"with “{_short(get('q'))}”")
    name = " ".join(parts)
    when = _time_part(params)
    if when:
        name += f", {when}"
    return name if len(name) <= NAME_MAX else name[: NAME_MAX - 1] + "…"


def saved_search_save(*, user: Any, params: QueryDict) -> tuple[SavedFilter, bool]:
    """Save the search of `params` as the user's own, named by default_name; (search, created).
    The same filters saved again by the same user give back the search already there."""
    query = search_query(params)
    existing = SavedFilter.objects.filter(created_by=user, case__isnull=True, query=query).first()
    if existing is not None:
        return existing, False
    saved = SavedFilter.objects.create(
        name=default_name(QueryDict(query)), query=query, created_by=user, case=None
    )
    return saved, True


def can_open_saved_search(user: Any, saved: SavedFilter) -> bool:
    return has_role(user, Role.INVESTIGATOR if saved.case_id else Role.VIEWER)


def can_change_saved_search(user: Any, saved: SavedFilter) -> bool:
    if saved.created_by_id == user.pk or has_role(user, Role.ADMIN):
        return has_role(user, Role.VIEWER)
    return saved.case is not None and can_change_case(user, saved.case)


@dataclass(frozen=True)
class Listed:
    mine: list[SavedFilter]  # the user's own, with or without a case
    shared: list[SavedFilter]  # others', shared
    cases: list[SavedFilter]  # others', in the open cases the user investigates

    @property
    def total(self) -> int:
        return len(self.mine) + len(self.shared) + len(self.cases)


def saved_searches_for(user: Any) -> Listed:
    """The saved searches the explorer lists for the user, newest first, LISTED of each kind."""
    every: QuerySet[SavedFilter] = SavedFilter.objects.select_related("case", "created_by")
    every = every.order_by("-created_at", "-id")
    others = every.exclude(created_by=user)
    cases: list[SavedFilter] = []
    if has_role(user, Role.INVESTIGATOR):
        cases = list(others.filter(case__investigators=user, case__status="open", shared=False)[:LISTED])
    mine = every.filter(created_by=user)
    if not has_role(user, Role.INVESTIGATOR):
        mine = mine.filter(case__isnull=True)  # (a case's search is not a viewer's to open)
    shared = others.filter(shared=True)
    if not has_role(user, Role.INVESTIGATOR):
        shared = shared.filter(case__isnull=True)
    return Listed(mine=list(mine[:LISTED]), shared=list(shared[:LISTED]), cases=cases)


def saved_search_find(searches: Listed, query: str) -> SavedFilter | None:
    """The listed search whose filters are exactly `query` (the explorer marks it)."""
    for saved in [*searches.mine, *searches.shared, *searches.cases]:
        if search_query(QueryDict(saved.query)) == query:
            return saved
    return None
