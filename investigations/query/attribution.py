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
    # For inferred_reopen: what the other logs of the same server say of the connection across
    # the reopening (they may name the same account on both sides, or another one).
    corroboration: str | None = None
    call: Event | None = None  # for a statement run inside a routine (in_routine): the CALL


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
    corroboration = _other_logs(event, evidence) if evidence is not None else None
    call = None
    if "in_routine" in event.flags:
        # server_audit logs a CALL after the statements its body ran: the session's next CALL.
        call = (
            Event.objects.filter(session_id=event.session_id, statement_type="CALL", id__gt=event.pk)
            .order_by("id")
            .first()
        )
    return Proof(kind, explained, opened_by, evidence, previous, corroboration, call)


def _other_logs(event: Event, banner: Gap) -> str | None:
    """What the server's other logs (server_audit, the table...) show of this connection from just
    before the reopening to this statement: the same account, another one, or a restart."""
    since = banner.started_at or banner.ended_at
    if since is None or event.occurred_at is None:
        return None
    others = Event.objects.filter(
        server=event.server,
        connection_id=event.connection_id,
        occurred_at__gte=since,
        occurred_at__lte=event.occurred_at,
        user__isnull=False,
    ).exclude(source_file_id=event.source_file_id)
    accounts = {(u, h) for u, h in others.values_list("user", "host")[:200]}
    restarts = Gap.objects.filter(server=event.server, reason=Gap.Reason.RESTART).exclude(
        source_file_id=banner.source_file_id
    )
    restarted = restarts.filter(ended_at__gte=since, ended_at__lte=event.occurred_at).first()
    if restarted is not None:
        return f"contradicted: another log of {event.server} shows a restart then ({restarted.detail})"
    if not accounts:
        return None
    if accounts == {(event.user, event.host)}:
        n = others.count()
        return (
            f"corroborated: {n} record(s) of another log of {event.server} name {event.user}@{event.host}"
            f" on connection {event.connection_id} across the reopening"
        )
    named = ", ".join(sorted(f"{u}@{h}" for u, h in accounts))
    return (
        f"contradicted: another log of {event.server} names {named} on connection {event.connection_id} then"
    )
