"""Pinning many events at once: a selection from a page, or every event a search matches into a
new case. Each pin goes through `cases.evidence_pin_many` (time and record hash kept, as one pin),
and the audit trail names every event pinned, in records of up to AUDIT_IDS_PER_RECORD ids."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from investigations import trail
from investigations.cases import PinResult, case_create, evidence_pin_many, note_add, saved_filter_add
from investigations.models import Case

AUDIT_IDS_PER_RECORD = 100  # the trail cuts a list in a record's details at 100 (trail._bounded)
SEARCH_NAME = "The search this case was made from"


def record_pins(who: Any, case: Case, result: PinResult, *, via: str) -> None:
    """One audit record per 100 events pinned (every id named), and one for a pin that added
    nothing (all were pinned already, or gone), so each request leaves a mark."""
    ids = result.pinned
    for start in range(0, len(ids), AUDIT_IDS_PER_RECORD):
        trail.record(who, trail.Action.CASE_CHANGE, case=case.pk, what="pin", via=via,
                     events=ids[start : start + AUDIT_IDS_PER_RECORD])  # fmt: skip
    if not ids or result.already or result.missing:
        trail.record(who, trail.Action.CASE_CHANGE, case=case.pk, what="pin", via=via, pinned=len(ids),
                     already_pinned=len(result.already), missing=result.missing)  # fmt: skip


def case_from_search(
    *,
    who: Any,
    title: str,
    description: str,
    query: str,
    event_ids: list[int],
    in_request: int,
    queue: Callable[[int, list[int], int], None],
) -> tuple[Case, PinResult | None]:
    """A new case holding the search (as a saved search) and its matching events: pinned here
    when there are at most `in_request`, else by a worker (`queue(case_id, event_ids, user_id)`
    once the case is committed; None is returned then)."""
    user = who.user if hasattr(who, "META") else who
    with transaction.atomic():
        case = case_create(user=user, title=title, description=description)
        trail.record(who, trail.Action.CASE_CREATE, case=case.pk, title=case.title, from_search=query,
                     matching=len(event_ids))  # fmt: skip
        saved_filter_add(case=case, user=user, name=SEARCH_NAME, query=query)
        if len(event_ids) > in_request:
            transaction.on_commit(lambda: queue(case.pk, event_ids, user.pk))
            return case, None
    return case, search_pins_write(case.pk, event_ids, user.pk, who=who)


def search_pins_write(case_id: int, event_ids: list[int], user_id: int, *, who: Any = None) -> PinResult:
    """Pin a search's events into its case and write a note saying how many matched and were
    pinned (the worker's task calls this; so does a small search's request)."""
    case = Case.objects.get(pk=case_id)
    user = get_user_model().objects.get(pk=user_id)
    with transaction.atomic():
        result = evidence_pin_many(case=case, event_ids=event_ids, user=user, limit=None)
        record_pins(who or user, case, result, via="new case from a search")
        gone = f"; {len(result.missing)} were no longer in the store" if result.missing else ""
        note_add(case=case, user=user, text=f"Made from the saved search “{SEARCH_NAME}”: {len(event_ids):,} "
                 f"events matched, {len(result.pinned):,} pinned{gone}.")  # fmt: skip
    return result
