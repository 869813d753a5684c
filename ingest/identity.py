"""A file's content, recognised under any name: how far its events are stored already (issue 22).

Exactly once rests on checkpoints committed with the rows, not on a unique index over every
event (docs/architecture.md, "Ingesting the same bytes twice stores nothing new"). Within one
read, a checkpoint says how far the store holds the file: every event that starts before
`SourceFile.stored_below`. Across reads, a file whose content was read before under another
name (a renamed copy, a .gz of it, a longer or a truncated version, an upload of it) is
recognised by its content: the SHA-256 of its first CONTENT_HEAD_BYTES finds the candidates
(`SourceFile.content_head`, indexed: one row per file, not per event), and the SHA-256 of the
bytes an earlier file hashed (`sha256` over `hashed_bytes`, kept with each commit) proves that
this one begins with them. Its events before that file's `stored_below` are then skipped.

Two reads of the same content at once: a read first waits for the source of each other file
of that content to be free (its advisory lock, which a poll or a one-shot read holds while it
reads), so it sees what that read committed; two reads that start at the same moment and wait
for each other are a deadlock PostgreSQL's detector breaks (one fails, having stored
nothing). A source whose backlog is being shared out (ingest.split) cannot be waited for:
ContentBusy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from typing import BinaryIO

from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from ingest.chunks import MissingBytes, RawReader
from ingest.models import SourceFile, Split

CONTENT_HEAD_BYTES = 1024  # (ingest.checkpoints.IDENTITY_BYTES: a followed file's head is this)
_LOCK_CLASS = 0x4157  # ingest.checkpoints.LOCK_CLASS: the source's lock
_BLOCK = 1 << 20


class ContentBusy(RuntimeError):
    """The same content is being read now by a source whose backlog is shared out."""


def content_head(head: bytes) -> str:
    """The SHA-256 of the content's first CONTENT_HEAD_BYTES (all of it when shorter)."""
    return hashlib.sha256(head[:CONTENT_HEAD_BYTES]).hexdigest()


def short_heads(head: bytes) -> set[str]:
    """The content heads a file shorter than CONTENT_HEAD_BYTES would have had if its content were
    one of `head`'s prefixes: such a file's head is the hash of all of it, so a file it grew into
    (a small log written on) has another head, and is found only by these (then proven, as every
    candidate is, by the hash of its bytes)."""
    sha = hashlib.sha256()
    found = set()
    for i in range(min(len(head), CONTENT_HEAD_BYTES - 1)):
        sha.update(head[i : i + 1])
        found.add(sha.hexdigest())
    return found


def prefix_hashes(f: BinaryIO, lengths: Iterable[int]) -> tuple[dict[int, str], int, str]:
    """The SHA-256 of the first n bytes of `f` for each n of `lengths` no longer than it, and its
    length and SHA-256 whole (one pass, a block at a time)."""
    wanted = sorted(set(lengths))
    found: dict[int, str] = {}
    sha = hashlib.sha256()
    done = 0
    for n in wanted:
        while done < n:
            block = f.read(min(_BLOCK, n - done))
            if not block:
                break
            sha.update(block)
            done += len(block)
        if done < n:
            break
        found[n] = sha.hexdigest()
    while block := f.read(_BLOCK):
        sha.update(block)
        done += len(block)
    return found, done, sha.hexdigest()


def _stored_hash(file_id: int, length: int) -> str | None:
    """The SHA-256 of a stored file's first `length` bytes, from its content chunks (None when
    the chunks do not hold them all)."""
    sha = hashlib.sha256()
    try:
        for piece in RawReader().pieces(file_id, 0, length):
            sha.update(piece)
    except MissingBytes:
        return None
    return sha.hexdigest()


def _wait_for(source_id: int) -> None:
    """Wait until no poll or one-shot read holds this source (its lock), then let it go."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s, %s)", [_LOCK_CLASS, source_id])
        cur.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, source_id])


def recognise(
    new: SourceFile,
    server: str,
    open_content: Callable[[], BinaryIO],
    *,
    same_source: bool,
) -> int:
    """How far the events of `new`'s content are stored already (0: none), found from the files
    read before it with the same server and first bytes; saved as its `stored_below`.

    1. Candidates: files of the same server with the same content_head, or whose whole content
       was shorter than CONTENT_HEAD_BYTES and is where `new` begins (short_heads) (of other sources only,
       unless `same_source`). Wait for each other source to be free (its lock), so
       what its read committed is seen; a source sharing out a backlog raises ContentBusy.
    2. A candidate whose hashed bytes begin `new` (an equal, renamed, gzipped or longer copy)
       holds its events below its `stored_below`; one whose first bytes are all of `new` (a
       truncated copy) holds those below `new`'s end, as far as it stored them.
    3. The largest of those is the answer: every event below it is stored, by that file or the
       ones it continued in turn.
    """
    with closing(open_content()) as f:
        heads = short_heads(f.read(CONTENT_HEAD_BYTES))
    heads.add(new.content_head)
    # The up to 1,024 heads as one array parameter: `content_head__in` made a placeholder and a
    # parameter of each, which Django resolved one by one, in both queries below: 0.05 CPU s of
    # the writer before every read's first byte (docs/benchmarks.md, "the ingest command's start").
    one_of_heads = RawSQL('"ingest_sourcefile"."content_head" = ANY(%s)', (sorted(heads),), BooleanField())
    query = SourceFile.objects.filter(one_of_heads, source__server=server)
    if not same_source:
        query = query.exclude(source_id=new.source_id)
    for source_id in query.exclude(source_id=new.source_id).values_list("source_id", flat=True).distinct():
        if Split.objects.filter(source_id=source_id, finished_at__isnull=True).exists():
            raise ContentBusy(
                f"the same content is being read by source {source_id} (its backlog shared out):"
                " read it again later"
            )
        _wait_for(source_id)
    query = query.filter(stored_below__gt=0)
    hashed = query.exclude(hashed_bytes=0)
    candidates = list(hashed.values_list("pk", "hashed_bytes", "sha256", "stored_below"))
    if not candidates:
        SourceFile.objects.filter(pk=new.pk).update(stored_below=0)
        return 0
    with closing(open_content()) as f:
        prefixes, length, whole = prefix_hashes(f, [n for _, n, _, _ in candidates])
    below = 0
    for pk, hashed, sha256, stored in candidates:
        if prefixes.get(hashed) == sha256:
            below = max(below, stored)
        elif hashed > length and stored > 0 and _stored_hash(pk, length) == whole:
            below = max(below, min(stored, length))
    # (Its own stored_below too: a file read before under this name holds what it held only if
    # its bytes are still those; otherwise nothing of it counts.)
    SourceFile.objects.filter(pk=new.pk).update(stored_below=below)
    return below


@contextmanager
def holding_source(source_id: int) -> Iterator[None]:
    """Hold the source's advisory lock (waiting for it) while a one-shot read stores its file,
    as a poll holds it (ingest.checkpoints.source_lock), so a later read of the same content
    waits for this one's commits (`recognise`)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s, %s)", [_LOCK_CLASS, source_id])
    try:
        yield
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, source_id])
