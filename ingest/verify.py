"""Checks the chain of custody (ingest.custody) against the store and the original files: what
`manage.py verify_evidence` runs.

Every check adds Findings: `altered` (something differs from what was recorded: the store, a
file, a report), `unchecked` (it could not be checked, and why: a file that is gone), `ok`.
Nothing that could not be checked is passed over in silence.
"""

from __future__ import annotations

import difflib
import glob
import gzip
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, LiteralString

import zstandard
from django.db import connection
from psycopg.sql import SQL, Identifier

from ingest.chunks import RawReader, unpack, with_raw
from ingest.custody import (
    HASH_CHUNK,
    ROW_CHECK_BYTES,
    ROW_DIGEST_BYTES,
    ZERO_HASH,
    Sha256State,
    batch_digest,
    link_hash,
    row_checks,
    row_digest,
)
from ingest.events import EventRecord
from ingest.models import CustodyHead, CustodyLink, Source, SourceFile
from ingest.rows import (
    EVENT_COLUMNS,
    ROW_COLUMNS,
    statement_id,
    statement_key,
    stored_copy_line,
    stored_narrow_line,
)

ALTERED, UNCHECKED, OK = "altered", "unchecked", "ok"
BATCHES = (CustodyLink.Kind.EVENTS, CustodyLink.Kind.ADOPTED)  # links that hold events
MAX_IDS_LISTED = 50  # event ids named in one finding
_COLUMNS = SQL(", ").join(Identifier(c) for c in ("id", *EVENT_COLUMNS))  # constants of ingest.rows
_ROW_COLUMNS = SQL(", ").join(Identifier(c) for c in ("id", *ROW_COLUMNS))  # (the same)
# A statement's ids tried for its key, at most (ingest.store tries as many before it gives up).
STATEMENT_ATTEMPTS = 64


@dataclass
class Finding:
    status: str  # ALTERED, UNCHECKED or OK
    what: str  # "chain", "events", "file", "event", "pin", "report"
    message: str
    source: str | None = None  # the source's name
    link: int | None = None  # the link's number in the source's chain
    file: str | None = None
    event_ids: list[int] = field(default_factory=list)


@dataclass
class Verification:
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # Statements of the dictionary checked so far: what is wrong with each (None: nothing).
    statements: dict[int, str | None] = field(default_factory=dict)

    def add(self, status: str, what: str, message: str, **where: Any) -> None:
        self.findings.append(Finding(status, what, message, **where))

    @property
    def altered(self) -> list[Finding]:
        return [f for f in self.findings if f.status == ALTERED]

    @property
    def unchecked(self) -> list[Finding]:
        return [f for f in self.findings if f.status == UNCHECKED]

    def as_dict(self) -> dict[str, Any]:
        return {
            "intact": not self.altered,
            "checked": dict(self.counts),
            "findings": [asdict(f) for f in self.findings],
        }


# -- the store: each source's chain and the events it covers ------------------------------------------


def flag_corrections() -> dict[tuple[str | None, str], list[tuple[str, int]]]:
    """Flags added to stored events after they were written, by event key: (flag, link number)."""
    added: dict[tuple[str | None, str], list[tuple[str, int]]] = defaultdict(list)
    for flag, keys, seq in CustodyLink.objects.filter(kind=CustodyLink.Kind.FLAGS).values_list(
        "flag", "keys", "seq"
    ):
        for when, record_hash in keys:
            added[(when, record_hash)].append((flag, seq))
    return added


def verify_store(v: Verification, sources: Iterable[Source]) -> None:
    """Each source's chain: its links, the events of each batch, and events no link covers."""
    corrections = flag_corrections()
    sources = list(sources)
    per_file = _events_per_file([s.pk for s in sources])
    for source in sources:
        links = verify_chain(v, source)
        covered = adopted = 0
        for link in links:
            if link.kind in BATCHES:
                n = verify_batch(v, source, link, corrections)
                covered += n
                adopted += n if link.kind == CustodyLink.Kind.ADOPTED else 0
        if adopted:
            said = f"{adopted} event(s) stored before the chain existed were sealed when it began"
            v.add(
                OK,
                "events",
                said + ": edits since then would show; before, nothing can tell",
                source=source.name,
            )
        total = sum(per_file.get(f, 0) for f in source.files.values_list("pk", flat=True))
        find_uncovered(v, source, links, covered, total)


def _events_per_file(source_ids: list[int]) -> dict[int, int]:
    """How many events each file of these sources has: one pass over the events for them all."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT source_file_id, count(*) FROM ingest_event WHERE source_file_id IN"
            " (SELECT id FROM ingest_sourcefile WHERE source_id = ANY(%s)) GROUP BY 1",
            [source_ids],
        )
        return dict(cur.fetchall())


def verify_chain(v: Verification, source: Source) -> list[CustodyLink]:
    """The links of a source's chain, each checked against its hash and the one before."""
    links = list(CustodyLink.objects.filter(source=source).order_by("seq"))
    prev, expected, broken = ZERO_HASH, 1, False
    for link in links:
        where = {"source": source.name, "link": link.seq}
        if link.seq != expected:
            v.add(ALTERED, "chain", f"links {expected} to {link.seq - 1} are missing from the chain", **where)
            broken = True
        if bytes(link.prev_hash) != prev:
            v.add(
                ALTERED,
                "chain",
                "this link does not follow the one before it (its previous hash differs)",
                **where,
            )
            broken = True
        values = {name: getattr(link, name) for name in ("source_id", "seq", "kind", "committed_at")}
        values.update(_link_fields(link))
        if link_hash(bytes(link.prev_hash), values) != bytes(link.hash):
            v.add(
                ALTERED,
                "chain",
                f"this {link.get_kind_display()} link was changed after it was written",
                **where,
            )
            broken = True
        prev, expected = bytes(link.hash), link.seq + 1
        v.counts["links"] += 1
    head = CustodyHead.objects.filter(source=source).first()
    last = (links[-1].seq, bytes(links[-1].hash)) if links else (0, ZERO_HASH)
    if (head is None and links) or (head is not None and (head.seq, bytes(head.hash)) != last):
        v.add(
            ALTERED, "chain", f"the chain's head does not name its last link ({last[0]})", source=source.name
        )
        broken = True
    if not broken:
        v.add(OK, "chain", f"{len(links)} links, each following the one before", source=source.name)
    return links


def _link_fields(link: CustodyLink) -> dict[str, Any]:
    names = (
        "source_file_id",
        "ingest_run_id",
        "id_after",
        "id_last",
        "offset_min",
        "offset_max",
        "event_count",
        "row_digests",
        "flag",
        "keys",
        "file_bytes",
        "file_sha256",
        "file_scope",
        "version",
        "rows_sha256",
        "chunks",
    )
    return {name: getattr(link, name) for name in names}


def _batch_rows(link: CustodyLink) -> list[dict[str, Any]]:
    """The stored events a link's batch consists of: its file's events in its id and offset range
    (for a link of version 3, their narrow rows as stored; before, the view's wide rows)."""
    narrow = link.version >= 3
    table = Identifier("ingest_event_row" if narrow else "ingest_event")
    query = SQL(
        "SELECT {} FROM {} WHERE source_file_id = %s AND id > %s AND id <= %s"
        " AND byte_offset BETWEEN %s AND %s ORDER BY id"
    ).format(_ROW_COLUMNS if narrow else _COLUMNS, table)
    with connection.cursor() as cur:
        cur.execute(
            query.as_string(connection.connection),
            [link.source_file_id, link.id_after, link.id_last, link.offset_min, link.offset_max],
        )
        names = [c.name for c in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _written_flags(
    v: Verification,
    row: dict[str, Any],
    corrections: dict[tuple[str | None, str], list[tuple[str, int]]],
    **where: Any,
) -> list[str]:
    """The event's flags as they were written: without those the chain says were added later."""
    flags = list(row["flags"])
    occurred = row["occurred_at"]
    key = (occurred.isoformat() if occurred else None, bytes(row["record_hash"]).hex())
    for flag, seq in corrections.get(key, ()):
        if flag in flags:
            del flags[len(flags) - 1 - flags[::-1].index(flag)]
        else:
            v.add(
                ALTERED, "events", f"event {row['id']} lost the flag {flag!r} that link {seq} added", **where
            )
    return flags


def verify_batch(
    v: Verification,
    source: Source,
    link: CustodyLink,
    corrections: dict[tuple[str | None, str], list[tuple[str, int]]],
) -> int:
    """Compare a batch's stored events with the digests its link recorded; returns how many
    stored events it covers. Differences are aligned (difflib) to name edited, inserted and
    missing events."""
    where = {"source": source.name, "link": link.seq}
    rows = _batch_rows(link)
    written = [_written_flags(v, r, corrections, **where) for r in rows]
    if link.version >= 2:
        verify_chunks(v, source, link)
        v.counts["events"] += len(rows)
        altered_statements = False
        if link.version >= 3:
            lines = [stored_narrow_line(r, flags).encode() for r, flags in zip(rows, written, strict=True)]
            named = verify_statements(v, link, rows, where)
            altered_statements = any(v.statements[number] is not None for number in named)
            digest = batch_digest(b"".join(lines), named.items())
        else:
            lines = [stored_copy_line(r, flags).encode() for r, flags in zip(rows, written, strict=True)]
            digest = hashlib.sha256(b"".join(lines)).digest()
        if len(rows) == link.event_count and digest == bytes(link.rows_sha256):
            return len(rows)
        # The batch differs: its rows' CRC-32s say which (the SHA-256 alone cannot).
        width = ROW_CHECK_BYTES
        checks = row_checks(lines)
        actual = [checks[i : i + width] for i in range(0, len(checks), width)]
        recorded = bytes(link.row_digests)
        expected = [recorded[i : i + width] for i in range(0, len(recorded), width)]
        if actual == expected and altered_statements:  # the rows are as written; their statements not
            return len(rows)
        if actual == expected:  # a collision of CRC-32s: say the batch differs, not where
            v.add(
                ALTERED,
                "events",
                f"the batch of link {link.seq} differs from how it was written (the rows' own "
                "checks do not tell which row)",
                event_ids=[r["id"] for r in rows][:MAX_IDS_LISTED],
                **where,
            )
            return len(rows)
        return _name_differences(v, link, rows, expected, actual, where)
    if any(r["raw"] is None for r in rows):  # written inline, moved into chunks since (0024)
        filled = with_raw([{**r} for r in rows])
        for r, f in zip(rows, filled, strict=True):
            r["raw_bytes"] = f["raw"] if f["raw"] is not None else b""
    actual = [
        row_digest(stored_copy_line(r, flags, version=1)) for r, flags in zip(rows, written, strict=True)
    ]
    recorded = bytes(link.row_digests)
    expected = [recorded[i : i + ROW_DIGEST_BYTES] for i in range(0, len(recorded), ROW_DIGEST_BYTES)]
    if actual != expected:
        # A batch written before issue 22 wrote raw bytes with tabs and line ends as hex: the same
        # bytes, another line (rows._legacy_copy_bytea). A batch is written whole by one version:
        # its digests are those of one way or the other, and neither matches an altered event.
        pairs = zip(rows, written, strict=True)
        legacy = [row_digest(stored_copy_line(r, flags, legacy_raw=True, version=1)) for r, flags in pairs]
        if sum(map(bytes.__eq__, legacy, expected)) > sum(map(bytes.__eq__, actual, expected)):
            actual = legacy
    v.counts["events"] += len(rows)
    if actual == expected and len(expected) == link.event_count:
        return len(rows)
    return _name_differences(v, link, rows, expected, actual, where)


def _name_differences(
    v: Verification,
    link: CustodyLink,
    rows: list[dict[str, Any]],
    expected: list[bytes],
    actual: list[bytes],
    where: dict[str, Any],
) -> int:
    """Align a batch's recorded row digests with its stored rows' (difflib) and name the edited,
    inserted and missing events; returns how many stored events the batch covers."""
    ids = [r["id"] for r in rows]
    place = f"batch of link {link.seq} (file #{link.source_file_id}, ids {link.id_after + 1}-{link.id_last})"
    matcher = difflib.SequenceMatcher(None, expected, actual, autojunk=False)
    for op, e1, e2, a1, a2 in matcher.get_opcodes():
        if op == "equal":
            continue
        changed = min(e2 - e1, a2 - a1) if op == "replace" else 0
        if changed:
            edited = ids[a1 : a1 + changed]
            v.add(
                ALTERED,
                "events",
                f"{len(edited)} stored event(s) differ from how they were written, in the {place}",
                event_ids=edited[:MAX_IDS_LISTED],
                **where,
            )
        if a2 - a1 > changed:
            extra = ids[a1 + changed : a2]
            v.add(
                ALTERED,
                "events",
                f"{len(extra)} event(s) that were never written by ingestion, in the {place}",
                event_ids=extra[:MAX_IDS_LISTED],
                **where,
            )
        if e2 - e1 > changed:
            before = ids[a1 - 1] if a1 > 0 else None
            after = ids[a1] if a1 < len(ids) else None
            v.add(
                ALTERED,
                "events",
                f"{e2 - e1 - changed} event(s) missing from the {place}: event number "
                f"{e1 + changed + 1} of {len(expected)}, between event ids {before or '(start)'} "
                f"and {after or '(end)'}",
                **where,
            )
    return len(rows)


def verify_statements(
    v: Verification, link: CustodyLink, rows: list[dict[str, Any]], where: dict[str, Any]
) -> dict[int, bytes]:
    """The statements a batch's narrow rows name, each checked once per verification: present,
    its key made again from its values (so an edited text, type, tables... is found), and its id
    one of its key's (so a key edited to match edited values is found too). A statement found
    altered is reported for each batch with the events of the batch that name it. Returns the
    stored key of each statement named (what the batch's digest covers)."""
    naming: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        naming[row["statement_id"]].append(row["id"])
    numbers = sorted(n for n in naming if n is not None)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT id, key, database, statement_type, tables, destructive, fingerprint, sql"
            " FROM ingest_statement WHERE id = ANY(%s)",
            [numbers],
        )
        stored = {row[0]: row[1:] for row in cur.fetchall()}
    keys: dict[int, bytes] = {}
    for number in numbers:
        values = stored.get(number)
        if values is not None:
            keys[number] = bytes(values[0])
        if number not in v.statements:
            v.statements[number] = _statement_problem(number, values)
            v.counts["statements"] += 1
        problem = v.statements[number]
        if problem is not None:
            ids = naming[number]
            v.add(
                ALTERED,
                "statement",
                f"statement {number}, named by {len(ids)} event(s) of the batch of link {link.seq},"
                f" {problem}",
                event_ids=ids[:MAX_IDS_LISTED],
                **where,
            )
    return keys


def _statement_problem(number: int, values: tuple[Any, ...] | None) -> str | None:
    """What is wrong with a stored statement (None: nothing)."""
    if values is None:
        return "is missing from the statement dictionary"
    key, database, statement_type, tables, destructive, fingerprint, sql = values
    if statement_key(database, statement_type, list(tables), destructive, fingerprint, sql) != bytes(key):
        return "was changed after it was written (its values no longer make its key)"
    if all(statement_id(bytes(key), attempt) != number for attempt in range(STATEMENT_ATTEMPTS)):
        return "was changed after it was written (its key is not one of its id's)"
    return None


def verify_chunks(v: Verification, source: Source, link: CustodyLink) -> None:
    """The content chunks a batch stored, each decompressed and hashed again: a changed byte of
    the log as kept, a chunk replaced or deleted. Names the events whose bytes it holds."""
    if not link.chunks:
        return
    where = {"source": source.name, "link": link.seq}
    starts = [int(start) for start, _, _ in link.chunks]
    with connection.cursor() as cur:
        cur.execute(
            "SELECT start, length, sha256, data FROM ingest_rawchunk"
            " WHERE source_file_id = %s AND start = ANY(%s)",
            [link.source_file_id, starts],
        )
        stored = {row[0]: row[1:] for row in cur.fetchall()}
    for start, length, sha256 in link.chunks:
        v.counts["chunks"] += 1
        row = stored.get(int(start))
        problem = None
        if row is None:
            problem = "is missing from the store"
        else:
            try:
                content = unpack(row[2])
            except zstandard.ZstdError:  # no frame: that is the finding
                content = None
            if content is None:
                problem = "is no longer a zstd frame"
            elif len(content) != length or hashlib.sha256(content).hexdigest() != sha256:
                problem = "no longer holds the bytes that were read (its SHA-256 differs)"
            elif row[0] != length or bytes(row[1]).hex() != sha256:
                problem = "has another length or SHA-256 recorded beside it than the chain has"
        if problem is not None:
            v.add(
                ALTERED,
                "chunk",
                f"the log's bytes {start}-{int(start) + int(length) - 1} kept for file "
                f"#{link.source_file_id} (link {link.seq}) {problem}",
                event_ids=_events_in(link.source_file_id, int(start), int(start) + int(length)),
                **where,
            )


def _events_in(file_id: int, start: int, end: int) -> list[int]:
    """Ids of the events whose raw bytes lie (in part) in [start, end) of the file's content."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT id FROM ingest_event_row WHERE source_file_id = %s AND raw IS NULL"
            " AND byte_offset < %s AND byte_offset + raw_length > %s ORDER BY id LIMIT %s",
            [file_id, end, start, MAX_IDS_LISTED],
        )
        return [r[0] for r in cur.fetchall()]


def find_uncovered(
    v: Verification, source: Source, links: list[CustodyLink], covered: int, total: int
) -> None:
    """Events of the source's files that no link accounts for: inserted into the store. They
    are looked for only when the source has more events than its batches hold."""
    if total == covered:
        return
    files = list(source.files.values_list("pk", flat=True))
    ranges = defaultdict(list)
    for link in links:
        if link.kind in BATCHES:
            ranges[link.source_file_id].append(
                (link.id_after, link.id_last, link.offset_min, link.offset_max)
            )
    uncovered = []
    with connection.cursor() as cur:
        cur.execute(
            "SELECT id, source_file_id, byte_offset FROM ingest_event"
            " WHERE source_file_id = ANY(%s) ORDER BY id",
            [files],
        )
        for event_id, file_id, offset in cur.fetchall():
            if not any(a < event_id <= b and lo <= offset <= hi for a, b, lo, hi in ranges[file_id]):
                uncovered.append(event_id)
    if uncovered:
        v.add(
            ALTERED,
            "events",
            f"{len(uncovered)} stored event(s) of this source are in no batch of its chain "
            "(inserted into the store, or stored before the chain existed)",
            source=source.name,
            event_ids=uncovered[:MAX_IDS_LISTED],
        )


# -- the original files -------------------------------------------------------------------------------


def _content(path: Path) -> Any:
    """The file's content as a binary stream: decompressed when it is gzip."""
    with path.open("rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else path.open("rb")


def _is_it(path: Path, sf: SourceFile) -> bool:
    """Whether the file at `path` is the one recorded: the same first bytes (the content's first
    head_length bytes for followed files, the first 64 KiB on disk for files read by `ingest`)."""
    try:
        if sf.head_length > 0:
            with _content(path) as f:
                return hashlib.sha256(f.read(sf.head_length)).hexdigest() == sf.head_sha256
        with path.open("rb") as f:
            return hashlib.sha256(f.read(64 * 1024)).hexdigest() == sf.head_sha256
    except (OSError, EOFError):
        return False


def locate(sf: SourceFile) -> tuple[list[Path], list[str]]:
    """Where the recorded file is now: its path, or a rotated name (`general.log.1`, `.gz`...)
    found by its first bytes. Returns the matches and every name looked at. A file read once by
    `ingest` (not followed: no rotation to follow) is the file at its path, whatever its first bytes."""
    names = [sf.path, *sorted(glob.glob(glob.escape(sf.path) + "?*"))]
    pattern = sf.source.path
    if pattern and pattern != sf.path:
        names += sorted(glob.glob(pattern))
    looked, found = [], []
    for name in dict.fromkeys(names):
        path = Path(name)
        looked.append(name)
        if path.is_file() and _is_it(path, sf):
            found.append(path)
    if not found and sf.head_length == 0 and Path(sf.path).is_file():
        found.append(Path(sf.path))
    return found, looked


def _prefix_hashes(path: Path, lengths: list[int]) -> tuple[dict[int, str], int]:
    """SHA-256 of the content's first n bytes for each n in `lengths`, in one pass; and the
    content's length (or how far it goes, when shorter than the longest)."""
    wanted = sorted(set(lengths))
    state, position, digests = Sha256State(), 0, {}
    with _content(path) as f:
        for n in wanted:
            while position < n:
                chunk = f.read(min(HASH_CHUNK, n - position))
                if not chunk:
                    return digests, position
                state.update(chunk)
                position += len(chunk)
            digests[n] = state.hexdigest()
        while chunk := f.read(HASH_CHUNK):
            position += len(chunk)
    return digests, position


def _gone(found: list[Path], looked: list[str]) -> str:
    present = [name for name in looked if Path(name).is_file()]
    if not present:
        return "the original file is gone: looked at " + ", ".join(looked)
    return (
        "no file begins with the recorded first bytes (another file now, or this one altered at its start): "
        "looked at " + ", ".join(looked)
    )


def verify_files(v: Verification, files: Iterable[SourceFile]) -> None:
    """Each file's recorded hashes so far (every poll's), against the file as it is now."""
    for sf in files:
        if sf.source.pulls_rows:
            continue  # rows of a live table: no file (each event's raw bytes are its row)
        where = {"source": sf.source.name, "file": sf.path}
        links = list(sf.custody_links.filter(kind=CustodyLink.Kind.FILE).order_by("seq"))
        content = [link for link in links if link.file_scope == "content"]
        received = [link for link in links if link.file_scope == "received"]
        newest = content[-1] if content else None
        if newest and (newest.file_bytes, newest.file_sha256) != (sf.hashed_bytes, sf.sha256):
            v.add(
                ALTERED,
                "file",
                f"the stored SHA-256 of this file ({sf.sha256 or 'none'} over {sf.hashed_bytes} "
                f"bytes) is not the one the chain recorded ({newest.file_sha256} over {newest.file_bytes})",
                **where,
            )
        if not links:
            if sf.bytes_read == 0:
                v.add(OK, "file", "nothing read from it yet", **where)
            else:
                v.add(
                    UNCHECKED,
                    "file",
                    "no hash of this file was recorded (read before the chain existed)",
                    **where,
                )
            continue
        if content and sf.hashed_bytes < sf.bytes_read:
            v.add(UNCHECKED, "file", f"its hash covers {sf.hashed_bytes} of the {sf.bytes_read} bytes read "
                  "(the file was gone when the rest was to be hashed)", **where)  # fmt: skip
        found, looked = locate(sf)
        if not found:
            v.add(UNCHECKED, "file", _gone(found, looked), **where)
            continue
        v.counts["files"] += 1
        verdicts = [_check_file(path, content, received) for path in found]
        good = [(path, text) for path, (bad, text) in zip(found, verdicts, strict=True) if not bad]
        if good:
            path, text = good[0]
            v.add(OK, "file", f"{path}: {text}", **where)
        else:
            for path, (_, text) in zip(found, verdicts, strict=True):
                v.add(ALTERED, "file", f"{path}: {text}", **where)


def _check_file(path: Path, content: list[CustodyLink], received: list[CustodyLink]) -> tuple[bool, str]:
    """(altered?, what was found) for one candidate of a recorded file."""
    digests, length = _prefix_hashes(path, [link.file_bytes for link in content])  # type: ignore[misc]  # file links always have file_bytes
    for link in content:
        got = digests.get(link.file_bytes)  # type: ignore[arg-type]  # never None, as above
        if got is None:
            return True, f"has {length} bytes, but {link.file_bytes} were read (link {link.seq}): truncated"
        if got != link.file_sha256:
            return True, (
                f"its first {link.file_bytes} bytes no longer hash to what was read "
                f"(link {link.seq}, {link.committed_at:%Y-%m-%d %H:%M:%S} UTC): it was changed"
            )
    for link in received:
        with path.open("rb") as f:
            if hashlib.file_digest(f, "sha256").hexdigest() != link.file_sha256:
                return (
                    True,
                    f"is not the file that was uploaded (SHA-256 {link.file_sha256}, link {link.seq})",
                )
    if content:
        newest = max(content, key=lambda link: link.file_bytes or 0)
        more = (
            f"; {length - newest.file_bytes} bytes more on disk now"
            if length > (newest.file_bytes or 0)
            else ""
        )
        return False, f"its first {newest.file_bytes} bytes match the {len(content)} hash(es) recorded{more}"
    return False, "matches the upload's SHA-256"


def verify_event_bytes(v: Verification, rows: Iterable[dict[str, Any]], what: str = "event") -> None:
    """Each event's record hash against its stored columns, and its raw bytes against the original
    file at its offset, where the file still exists."""
    by_file: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_file[row["source_file_id"]].append(row)
        _check_record_hash(v, row, what)
    files = SourceFile.objects.select_related("source").in_bulk(list(by_file))
    for file_id, events in by_file.items():
        sf = files.get(file_id)
        ids = [e["id"] for e in events]
        if sf is None:
            v.add(
                ALTERED,
                what,
                f"the events' source file #{file_id} is not in the store",
                event_ids=ids[:MAX_IDS_LISTED],
            )
            continue
        where = {"source": sf.source.name, "file": sf.path}
        if sf.source.pulls_rows:
            v.add(
                UNCHECKED,
                what,
                f"{len(events)} event(s) from a live table: there is no original file to re-read",
                event_ids=ids[:MAX_IDS_LISTED],
                **where,
            )
            continue
        found, looked = locate(sf)
        if not found:
            v.add(
                UNCHECKED,
                what,
                f"{len(events)} event(s) not re-read: {_gone(found, looked)}",
                event_ids=ids[:MAX_IDS_LISTED],
                **where,
            )
            continue
        results = {path: _reread(path, events) for path in found}
        path, differ = min(results.items(), key=lambda item: len(item[1]))
        v.counts[f"{what} bytes re-read"] += len(events)
        if differ:
            v.add(
                ALTERED,
                what,
                f"{len(differ)} event(s) whose bytes in {path} differ from what was read",
                event_ids=differ[:MAX_IDS_LISTED],
                **where,
            )
        else:
            v.add(OK, what, f"{len(events)} event(s) match their bytes in {path}", **where)


def _check_record_hash(v: Verification, row: dict[str, Any], what: str) -> None:
    """The record hash is made of the server, time, offset and raw bytes: made again, it must match."""
    if row.get("raw_missing"):
        v.add(
            ALTERED,
            what,
            f"event {row['id']}: its raw bytes are gone from the store ({row['raw_missing']})",
            event_ids=[row["id"]],
        )
        return
    occurred = row["occurred_at"]
    probe = EventRecord(
        occurred_at=occurred,
        server=row["server"],
        session=None,  # type: ignore[arg-type]  # the record hash reads no session
        connection_id=None,
        user=None,
        host=None,
        ip=None,
        database=None,
        command="",
        sql="",
        raw=bytes(row["raw"]),
        line=0,
        offset=row["byte_offset"],
    )
    if probe.record_hash() != bytes(row["record_hash"]):
        files = SourceFile.objects.filter(pk=row["source_file_id"])
        v.add(
            ALTERED,
            what,
            f"event {row['id']}: its server, time, offset or raw bytes were changed in the store "
            "(they no longer make its record hash)",
            source=files.values_list("source__name", flat=True).first(),
            event_ids=[row["id"]],
        )


def _reread(path: Path, events: list[dict[str, Any]]) -> list[int]:
    """Ids of the events whose raw bytes are not at their offset in the file's content."""
    differ = []
    with _content(path) as f:
        for row in sorted(events, key=lambda r: r["byte_offset"]):
            if row["raw"] is None:  # gone from the store: said by the record hash's check
                continue
            raw = bytes(row["raw"])
            try:
                f.seek(row["byte_offset"])  # forward in order: a .gz is decompressed once
                if f.read(len(raw)) != raw:
                    differ.append(row["id"])
            except (OSError, EOFError):
                differ.append(row["id"])
    return differ


def event_rows(where: LiteralString, params: list[Any]) -> Iterator[dict[str, Any]]:
    """Stored events chosen by a WHERE clause (a constant of the caller, with parameters)."""
    statement = SQL("SELECT {} FROM ingest_event WHERE {} ORDER BY id").format(_COLUMNS, SQL(where))
    with connection.cursor() as cur:
        cur.execute(statement.as_string(connection.connection), params)
        names = [c.name for c in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    # Their raw bytes, from the chunks where they are not inline (`raw_missing` where none holds them).
    yield from with_raw(rows, RawReader())


def sample_ids(source_ids: list[int], size: int) -> list[int]:
    """Up to `size` event ids of these sources, spread evenly over their id order."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM ingest_event e JOIN ingest_sourcefile f ON f.id = e.source_file_id"
            " WHERE f.source_id = ANY(%s)",
            [source_ids],
        )
        total = cur.fetchone()[0]
        step = max(1, total // max(size, 1))
        cur.execute(
            "SELECT id FROM (SELECT e.id, row_number() OVER (ORDER BY e.id) AS n FROM ingest_event e"
            " JOIN ingest_sourcefile f ON f.id = e.source_file_id WHERE f.source_id = ANY(%s)) numbered"
            " WHERE n %% %s = 0 LIMIT %s",
            [source_ids, step, size],
        )
        return [r[0] for r in cur.fetchall()]
