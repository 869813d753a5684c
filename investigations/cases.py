"""Cases: the workflows over several models (create a case, pin an event, write a note).

Views and the API call these; none of them repeats a permission rule (see `can_change_case`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from ingest.models import Event
from investigations.models import Case, CaseNote, Evidence, SavedFilter
from investigations.roles import Role, has_role


class AlreadyPinned(Exception):
    """The event is already evidence in that case."""


class CaseClosed(Exception):
    """A closed case takes no new evidence or notes until it is reopened."""


def can_change_case(user: Any, case: Case) -> bool:
    """Only the case's investigators and admins change a case (pin, note, edit, close, report).
    Other investigators may read it: a case is shared knowledge, its record is not theirs to edit."""
    if has_role(user, Role.ADMIN):
        return True
    return has_role(user, Role.INVESTIGATOR) and case.investigators.filter(pk=user.pk).exists()


def case_create(
    *,
    user: Any,
    title: str,
    description: str = "",
    window_start: datetime | None = None,
    window_end: datetime | None = None,
) -> Case:
    """A new open case whose first investigator is the user who opened it."""
    with transaction.atomic():
        case = Case.objects.create(
            title=title,
            description=description,
            created_by=user,
            window_start=window_start,
            window_end=window_end,
        )
        case.investigators.add(user)
    return case


def case_set_status(*, case: Case, status: str) -> None:
    case.status = status
    case.closed_at = timezone.now() if status == Case.Status.CLOSED else None
    case.save(update_fields=["status", "closed_at", "updated_at"])


def cases_to_pin_into(user: Any) -> QuerySet[Case]:
    """The open cases the user may add to, most recently worked on first (the pin form
    preselects the first)."""
    cases = Case.objects.filter(status=Case.Status.OPEN)
    if not has_role(user, Role.ADMIN):
        cases = cases.filter(investigators=user)
    return cases.order_by("-updated_at", "-pk")


def _touch(case: Case) -> None:
    """The case was worked on now (orders the pin form's choice of cases)."""
    Case.objects.filter(pk=case.pk).update(updated_at=timezone.now())


def evidence_pin(*, case: Case, event: Event, user: Any, note: str = "") -> Evidence:
    """Pin the event to the case, keeping its time and record hash as they are now."""
    if case.status == Case.Status.CLOSED:
        raise CaseClosed(str(case))
    try:
        with transaction.atomic():
            _lock_open(case)
            pin = Evidence.objects.create(
                case=case,
                event=event,
                event_occurred_at=event.occurred_at,
                event_record_hash=bytes(event.record_hash),
                note=note,
                pinned_by=user,
            )
    except IntegrityError as exc:
        raise AlreadyPinned(f"event {event.pk} is already in case {case.pk}") from exc
    _touch(case)
    return pin


def _lock_open(case: Case) -> None:
    """Lock the case row for this transaction (pins of one case queue up behind each other, so a
    bulk pin knows exactly which it added) and refuse it once closed, as it is now."""
    status = Case.objects.select_for_update().filter(pk=case.pk).values_list("status", flat=True).first()
    if status != Case.Status.OPEN:
        raise CaseClosed(str(case))


MAX_PINS_PER_REQUEST = 500  # events one bulk pin (a page's selection, or an API call) may name


class TooManyEvents(ValueError):
    """More events than one operation pins (the caller says the limit)."""


@dataclass
class PinResult:
    """What a bulk pin did, by event id: pinned now, pinned before, not in the store."""

    pinned: list[int] = field(default_factory=list)
    already: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)


def evidence_pin_many(
    *,
    case: Case,
    event_ids: Iterable[int],
    user: Any,
    note: str = "",
    limit: int | None = MAX_PINS_PER_REQUEST,
) -> PinResult:
    """Pin several events in one transaction, each kept as `evidence_pin` keeps one (its time and
    record hash now). Idempotent: events already in the case are reported, not pinned again.
    Refuses more than `limit` distinct ids (None: no limit, for a bounded search's own count)."""
    wanted = list(dict.fromkeys(int(i) for i in event_ids))
    if limit is not None and len(wanted) > limit:
        raise TooManyEvents(f"{len(wanted)} events: at most {limit} are pinned at once")
    result = PinResult()
    with transaction.atomic():
        _lock_open(case)
        for chunk in _chunks(wanted, 5000):
            _pin_chunk(case, chunk, user, note, result)
    if result.pinned:
        _touch(case)
    return result


def _chunks(items: Sequence[int], size: int) -> Iterable[Sequence[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _pin_chunk(case: Case, ids: Sequence[int], user: Any, note: str, result: PinResult) -> None:
    had = set(Evidence.objects.filter(case=case, event_id__in=ids).values_list("event_id", flat=True))
    rows = Event.objects.filter(pk__in=[i for i in ids if i not in had])
    found = {pk: (at, h) for pk, at, h in rows.values_list("pk", "occurred_at", "record_hash")}
    new = []
    for i in ids:
        if i in had:
            result.already.append(i)
        elif i not in found:
            result.missing.append(i)
        else:
            at, record_hash = found[i]
            kept = {"event_occurred_at": at, "event_record_hash": bytes(record_hash)}  # as evidence_pin keeps
            new.append(Evidence(case=case, event_id=i, note=note, pinned_by=user, **kept))
            result.pinned.append(i)
    Evidence.objects.bulk_create(new, batch_size=1000)


def pins_of(event_ids: Iterable[int]) -> dict[int, list[Case]]:
    """The cases each event is pinned to (for the pinned marks beside listed events)."""
    by_event: dict[int, list[Case]] = {}
    pins = Evidence.objects.filter(event_id__in=list(event_ids)).select_related("case").order_by("case_id")
    for pin in pins.only("event_id", "case__id", "case__title", "case__status"):
        by_event.setdefault(pin.event_id, []).append(pin.case)
    return by_event


def evidence_remove(*, case: Case, event_id: int) -> bool:
    """Unpin an event; False when it was not pinned to the case."""
    if case.status == Case.Status.CLOSED:
        raise CaseClosed(str(case))
    deleted, _ = Evidence.objects.filter(case=case, event_id=event_id).delete()
    _touch(case)
    return deleted > 0


def note_add(*, case: Case, user: Any, text: str) -> CaseNote:
    if case.status == Case.Status.CLOSED:
        raise CaseClosed(str(case))
    note = CaseNote.objects.create(case=case, author=user, text=text)
    _touch(case)
    return note


def saved_filter_add(*, case: Case, user: Any, name: str, query: str) -> SavedFilter:
    return SavedFilter.objects.create(case=case, name=name, query=query.lstrip("?"), created_by=user)
