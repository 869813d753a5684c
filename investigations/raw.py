"""What AuditWeb shows of an event's raw log bytes, and an admin's reveal of them.

The SQL of a record that held a password or key is masked at ingest (`ingest.sql.secrets`) and
the event is flagged `secret_masked`; its raw bytes stay exactly as read, sealed by the record
hash and the custody chain. Pages, API answers and reports show such raw bytes cut where the
secret may begin (`secrets.masked_raw`), labelled as such. Only an admin sees them whole, one event
at a time, with a reason that the audit trail records (`reveal_raw`).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from ingest.models import Event
from ingest.sql.secrets import masked_raw
from investigations import audit

MASKED_FLAG = "secret_masked"
MAX_REASON = 1000  # characters of a reveal's reason


def raw_withheld(event: Event) -> bool:
    """Whether the event's raw bytes hold a secret that only an admin's reveal may show."""
    return MASKED_FLAG in (event.flags or ())


def shown_raw(event: Event) -> bytes:
    """The raw bytes anybody may see: whole, or cut before the secret when it held one."""
    raw = bytes(event.raw)
    return masked_raw(raw) if raw_withheld(event) else raw


def reason_error(reason: Any) -> str | None:
    """Why a reveal's reason is refused, or None when it is a fit reason."""
    if not isinstance(reason, str) or not reason.strip():
        return "Say why you need the raw bytes: the reason is recorded in the audit trail."
    if len(reason) > MAX_REASON:
        return f"At most {MAX_REASON} characters."
    if "\x00" in reason:
        return "The reason cannot hold a NUL character."
    return None


def reveal_raw(request: HttpRequest, event: Event, reason: str) -> bytes:
    """The event's exact raw bytes, for an admin; recorded in the audit trail with the reason."""
    audit.record(
        request,
        audit.Action.RAW_REVEAL,
        event=event.pk,
        server=event.server,
        reason=reason.strip(),
        withheld=raw_withheld(event),
    )
    return bytes(event.raw)
