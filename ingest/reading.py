"""Reading a log's lines with a bound on each: a hostile line cannot take the memory (issue 18).

Pure (no Django). A log line can be 1 GiB, so `CappedLines` hands the parser a longer line than
`cap` as its head, a marker and its last `TAIL_BYTES` (where a record closes); `uncut` gives items
back their true offsets and raw bytes. Details: docs/architecture.md, "A line is read whole".
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, LogRecord, Problem, ServerStart

TAIL_BYTES = 4096
_PIECE = 1 << 20  # what is read of an over-long line at a time


@dataclass(frozen=True, slots=True)
class Cut:
    line: int  # the line's number (1-based, counted from the first line read)
    start: int  # the line's offset as the parser counts (what it was handed before it)
    head: int  # bytes of the line kept before the marker
    handed: int  # bytes handed to the parser for it (head, marker, tail)
    length: int  # the line's true length
    sha256: str  # of the whole line
    excerpt: bytes  # its first PROBLEM_EXCERPT_BYTES

    @property
    def removed(self) -> int:
        return self.length - self.handed


def _head(line: bytes, size: int) -> bytes:
    """The first `size` bytes of `line`, not ending inside a UTF-8 character or an escape."""
    head = line[:size]
    # Step back over continuation bytes (10xxxxxx) and the lead byte before them, so the
    # marker never splits a character; then over backslashes, so none escapes the marker.
    j = len(head)
    while j > 0 and len(head) - j < 3 and 0x80 <= head[j - 1] <= 0xBF:
        j -= 1
    if j > 0 and head[j - 1] >= 0xC0:
        head = head[: j - 1]
    return head.rstrip(b"\\")


class CappedLines:
    """The lines of `stream`, each at most about `cap` bytes as handed over (see the module)."""

    def __init__(self, stream: BinaryIO, cap: int, *, start_offset: int = 0, start_line: int = 1) -> None:
        if cap < 2 * TAIL_BYTES:
            raise ValueError(f"cap must be at least {2 * TAIL_BYTES} bytes")
        self.stream = stream
        self.cap = cap
        self.cuts: list[Cut] = []
        self._offset = start_offset
        self._line = start_line

    def __iter__(self) -> Iterator[bytes]:
        readline, cap = self.stream.readline, self.cap
        while True:
            line = readline(cap + 1)
            if not line:
                return
            if len(line) <= cap or line.endswith(b"\n"):
                self._offset += len(line)
                self._line += 1
                yield line
                continue
            handed = self._cut(line)
            self._offset += len(handed)
            self._line += 1
            yield handed

    def _cut(self, first: bytes) -> bytes:
        """Read the rest of an over-long line; return what the parser is handed for it."""
        length, sha, tail = read_long_line(first, self.stream.readline)
        handed, cut = cut_line(first, length, sha, tail, self.cap, line=self._line, start=self._offset)
        self.cuts.append(cut)
        return handed  # the tail keeps the line's own end ("\n", "\r\n", or none at the end)


def read_long_line(
    first: bytes, readline: Callable[[int], bytes], budget: int | None = None
) -> tuple[int, str, bytes]:
    """Read on to the end of a line that begins with `first` (no newline in it), in bounded
    pieces and at most `budget` bytes in all (counting `first`; None: to the line's end).
    Returns its length, its SHA-256 and its last TAIL_BYTES bytes (with its newline, if any)."""
    digest = hashlib.sha256(first)
    length = len(first)
    tail = first[-TAIL_BYTES:]
    piece = first
    while not piece.endswith(b"\n"):
        want = _PIECE if budget is None else min(_PIECE, budget - length)
        piece = readline(want) if want > 0 else b""
        if not piece:
            break
        digest.update(piece)
        length += len(piece)
        tail = (tail + piece)[-TAIL_BYTES:]
    return length, digest.hexdigest(), tail


def cut_line(
    first: bytes, length: int, sha: str, tail: bytes, cap: int, *, line: int, start: int
) -> tuple[bytes, Cut]:
    """What the parser is handed for an over-long line (head, marker, tail), and its Cut.
    `start` is the line's offset as the parser counts."""
    marker = f" [AuditWeb: {length}-byte line cut, sha256 {sha}] ".encode()
    head = _head(first, cap - TAIL_BYTES - len(marker))
    handed = head + marker + tail
    return handed, Cut(line, start, len(head), len(handed), length, sha, first[:PROBLEM_EXCERPT_BYTES])


def uncut(items: Iterable[Item], cuts: list[Cut], until: Callable[[], int] | None = None) -> Iterator[Item]:
    """`items` of a parser fed by CappedLines, with true offsets, and their cuts said.

    1. An item's offset moves on by the bytes removed from the cut lines before it.
    2. A record or banner that holds a cut line keeps its raw bytes up to the cut (a prefix
       of the file), gets `extra["cut"]` (line, true length, sha256 of the line), and a
       Problem at its offset says so.
    3. A cut line in no record lies in the run of bytes a parser's Problem reports (every
       byte is in a record or a problem): that Problem's reason says the cut too.
    4. `until` (a read that stops where the bytes end for now and reads the rest again later):
       at the end, only the cut lines before that offset (as the parser counts: its resume
       point) are said; those after it belong to a record still pending.
    """
    ends: list[int] = []  # ends (as the parser counts) of the cuts known so far
    removed: list[int] = [0]  # bytes removed by the first k cuts, for each k
    said = 0  # cuts before this one are said
    pending: Problem | None = None  # the last Problem, held until the cuts after it are known

    def sync() -> None:
        while len(ends) < len(cuts):  # cuts are appended as lines are read: ahead of items
            c = cuts[len(ends)]
            ends.append(c.start + c.handed)
            removed.append(removed[-1] + c.removed)

    for item in items:
        if not cuts:  # nearly every read: no line was cut (sync has nothing to do)
            yield item
            continue
        sync()
        start = item.offset
        before = bisect_right(ends, start)
        yield from _say(cuts[said:before], pending, removed, said)
        said = max(said, before)
        pending = None
        item.offset = start + removed[before]
        if isinstance(item, Problem):
            pending = item
            continue
        inside = before < len(ends) and cuts[before].start < start + len(item.raw)
        if inside and isinstance(item, (LogRecord, ServerStart)):
            c = cuts[before]
            item.raw = item.raw[: max(c.start - start, 0) + c.head]
            if isinstance(item, LogRecord):
                item.extra["cut"] = _note(c)
            yield item
            excerpt = item.raw[:PROBLEM_EXCERPT_BYTES]
            yield Problem(line=item.line, offset=item.offset, raw=excerpt, reason=_reason(c))
            said = before + 1
            continue
        yield item
    sync()
    rest = cuts[said:]
    if until is not None:
        limit = until()
        rest = [c for c in rest if c.start < limit]
    yield from _say(rest, pending, removed, said)


def _say(cuts: list[Cut], pending: Problem | None, removed: list[int], first: int) -> Iterator[Problem]:
    """The held Problem with the cut lines of its run added to its reason (or, without one,
    a Problem for each), then nothing more is held."""
    if pending is not None:
        for c in cuts:
            pending.reason += f"; {_reason(c)}"
        yield pending
        return
    for k, c in enumerate(cuts, first):
        yield Problem(line=c.line, offset=c.start + removed[k], raw=c.excerpt, reason=_reason(c))


def _note(c: Cut) -> str:
    return f"line {c.line} holds {c.length} bytes (sha256 {c.sha256}); the first {c.head} are kept"


def _reason(c: Cut) -> str:
    return f"record cut: {_note(c)}, and its last {TAIL_BYTES} were read to find its end"
