"""Why an event is someone's: the proof of its attribution, for the event page, the API and reports.

The store keeps, on each event, how its account is known (`Event.attribution`) and, on its session,
the record that named the account (its Connect or Change user: `Session.opened_time/opened_hash`,
its identity in the store). Inferred attributions point at the banner whose evidence did not decide.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.models import Event, Gap, Session

EXPLAINED = {
    "record": "the log record itself names the account",
    "connect": "the connection's login (Connect or Change user) names the account, in the same file",
    "connect_earlier_file": "the connection's login names the account, in an earlier file of the same server",
    "inferred_reopen": (
        "the connection's login before a log reopening names the account; that the connection went on"
        " across it is inferred: the logs do not prove that the server did not restart there"
    ),
    "unattributed": (
        "unknown: the connection began before the logs read, or changed to an account no record names"
    ),
}


@dataclass
class Proof:
    attribution: str | None  # None: stored before AuditWeb recorded it
    explained: str
    opened_by: Event | None  # the Connect or Change user record, when it is in the store
    evidence: Gap | None  # for inferred_reopen: the banner the logs could not decide
    previous: Session | None  # the session before a change of user on the same connection


def attribution_proof(event: Event) -> Proof:
    """How `event`'s account is known, with the records and the gap that show it."""
    kind = event.attribution or None
    session = event.session
    opened_by = None
    if kind in ("connect", "connect_earlier_file", "inferred_reopen") and session.opened_hash is not None:
        opened_by = (
            Event.objects.select_related("source_file")
            .filter(occurred_at=session.opened_time, record_hash=bytes(session.opened_hash))
            .first()
        )
    evidence = None
    if kind == "inferred_reopen" and event.occurred_at is not None:
        evidence = (
            Gap.objects.filter(
                server=event.server, reason=Gap.Reason.LOG_OPENED, ended_at__lte=event.occurred_at
            )
            .order_by("-ended_at", "-id")
            .first()
        )
    previous = Session.objects.filter(pk=session.previous_id).first() if session.previous_id else None
    explained = EXPLAINED.get(kind or "", "not recorded: the event was stored before AuditWeb recorded it")
    return Proof(kind, explained, opened_by, evidence, previous)
