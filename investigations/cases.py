"""Cases: the workflows over several models (create a case, pin an event, write a note).

Views and the API call these; none of them repeats a permission rule (see `can_change_case`).
"""

from __future__ import annotations

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
