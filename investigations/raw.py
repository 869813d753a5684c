"""What AuditWeb shows of an event's raw log bytes, and an admin's reveal of them.

The SQL of a record that held a password or key is masked at ingest (`ingest.sql.secrets`) and
the event is flagged `secret_masked`; its raw bytes stay exactly as read, sealed by the record
hash and the custody chain. Pages, API answers and reports show such raw bytes cut where the
secret may begin (`secrets.masked_raw`), labelled as such. Only an admin sees them whole, one event
at a time, with a reason that the audit trail records (`reveal_raw`).

A record can be large (a statement of many MiB): pages and API answers show at most
SHOWN_MAX_BYTES of it (`shown_part`) and say how much there is; the whole is a download
(`raw_download`), streamed from PostgreSQL in pieces, under the same rule as the reveal
(`raw_refusal`): a record that holds a secret only for an admin, with a reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection
from django.db.models import BinaryField
from django.db.models.functions import Coalesce, Length, Substr
from django.http import HttpRequest, StreamingHttpResponse

from ingest.chunks import MissingBytes, RawReader
from ingest.models import Event
from ingest.sql.secrets import masked_raw
from investigations import trail
from investigations.roles import Role, has_role

MASKED_FLAG = "secret_masked"
MAX_REASON = 1000  # characters of a reveal's reason
DOWNLOAD_PIECE = 1 << 20  # bytes of a record fetched from PostgreSQL at a time
# What reading an event's raw bytes needs (ingest.models.Event.raw): inline, or where in its file.
RAW_FIELDS = ("id", "raw_inline", "raw_length", "source_file_id", "byte_offset")

Shown = TypeVar("Shown", bytes, str)  # a part of bytes is bytes, of text is text


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
    trail.record(
        request,
        trail.Action.RAW_REVEAL,
        event=event.pk,
        server=event.server,
        reason=reason.strip(),
        withheld=raw_withheld(event),
    )
    return bytes(event.raw)


def shown_part(data: Shown) -> Shown:
    """The part of a record's raw bytes (or of its SQL) a page or an API answer shows."""
    return data[: settings.SHOWN_MAX_BYTES]


def raw_refusal(request: HttpRequest, event: Event, reason: Any) -> str | None:
    """Why this request may not have the event's whole raw bytes, or None when it may.

    The rule of the page and the API alike: whoever may see the event may download raw bytes
    that hold no secret; those that do (`raw_withheld`) only an admin may have, with a fit
    reason, as with a reveal."""
    if not raw_withheld(event):
        return None
    if not has_role(request.user, Role.ADMIN):
        return "This record holds a password or a key: only an admin may download it, with a reason."
    return reason_error(reason)


def raw_event(event_id: int) -> Event | None:
    """The event with its raw bytes' length (`raw_length`), without loading the bytes."""
    fields = ("server", "flags", "record_hash", "occurred_at", "line", *RAW_FIELDS)
    events = Event.objects.only(*fields).defer("raw_inline")
    # (Events stored before their length was: as long as their inline bytes.)
    events = events.annotate(raw_size=Coalesce("raw_length", Length("raw_inline")))
    return events.filter(pk=event_id).first()


def raw_download(request: HttpRequest, event: Event, reason: Any = None) -> StreamingHttpResponse:
    """The event's whole raw bytes as a file, streamed in pieces; recorded in the audit trail."""
    length = int(getattr(event, "raw_size", 0) or 0)  # annotated by raw_event
    withheld = raw_withheld(event)
    trail.record(
        request,
        trail.Action.RAW_REVEAL if withheld else trail.Action.RAW_DOWNLOAD,
        event=event.pk,
        server=event.server,
        reason=reason.strip() if isinstance(reason, str) else "",
        withheld=withheld,
        bytes=length,
    )
    pieces = _pieces(event.pk, length) if event.raw_length is None else _chunk_pieces(event, length)
    response = StreamingHttpResponse(pieces, content_type="application/octet-stream")
    response["Content-Length"] = str(length)
    response["Content-Disposition"] = f'attachment; filename="event-{event.pk}-raw.log"'
    response["X-Record-Hash"] = bytes(event.record_hash).hex()
    response["Cache-Control"] = "no-store"
    return response


def _chunk_pieces(event: Event, length: int) -> Iterator[bytes]:
    """The bytes of an event that lives in its file's chunks (ingest.chunks), a chunk at a time, or
    those inline (an event whose bytes are no slice of a file), fetched in pieces."""
    with connection.cursor() as cur:
        cur.execute("SELECT raw IS NULL FROM ingest_event WHERE id = %s", [event.pk])
        row = cur.fetchone()
    if row is None:  # gone since (a source deleted): the answer ends short of its length
        return
    if not row[0]:
        yield from _pieces(event.pk, length)
        return
    held = b""  # handed on in pieces of DOWNLOAD_PIECE, whatever the chunks' size
    try:
        for part in RawReader().pieces(event.source_file_id, event.byte_offset, length):
            held += part
            while len(held) >= DOWNLOAD_PIECE:
                yield held[:DOWNLOAD_PIECE]
                held = held[DOWNLOAD_PIECE:]
    except MissingBytes:  # gone from the store: the answer ends short (verify_evidence says why)
        return
    if held:
        yield held


def _pieces(event_id: int, length: int) -> Iterator[bytes]:
    for start in range(0, length, DOWNLOAD_PIECE):
        piece = Substr("raw_inline", start + 1, DOWNLOAD_PIECE, output_field=BinaryField())
        row = Event.objects.filter(pk=event_id).annotate(piece=piece).values_list("piece", flat=True).first()
        if row is None:  # gone since (a source deleted): the answer ends short of its length
            return
        yield bytes(row)
