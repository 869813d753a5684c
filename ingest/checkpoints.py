"""Which files of a source to read next, from where: file identity across rotations.

A followed file is known by its device and inode and by the SHA-256 of its first bytes, so a
rotation (rename, copytruncate, gzip) neither loses nor repeats what was read; the newest file
waits for a complete or quiet last record. The rules: docs/architecture.md, "Following sources"
and "The quiet tail".
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import hashlib
import io
import itertools
import json
import os
import re
import stat
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

from ingest.batch import ResumePoint
from ingest.identity import recognise
from ingest.models import Source, SourceFile

IDENTITY_BYTES = 1024
GZIP_MAGIC = b"\x1f\x8b"
_WILDCARD = re.compile(r"[*?[]")  # what makes a path component a glob pattern
# First key of the two-int advisory lock pg_try_advisory_lock(LOCK_CLASS, source id): "AW".
LOCK_CLASS = 0x4157


@dataclass
class Candidate:
    """A file the source's path or glob matches now."""

    path: Path
    device: int
    inode: int
    size: int  # on disk
    mtime: float
    compressed: bool
    head: bytes  # the first IDENTITY_BYTES of the content (decompressed)

    @property
    def head_sha256(self) -> str:
        return hashlib.sha256(self.head).hexdigest()

    def head_matches(self, known: SourceFile) -> bool:
        n = known.head_length
        return 0 < n <= len(self.head) and hashlib.sha256(self.head[:n]).hexdigest() == known.head_sha256


@dataclass
class Read:
    """One file to read in this poll: from `known`'s resume point (or the start) to its end."""

    candidate: Candidate
    known: SourceFile | None  # None: a new file
    finish: bool  # read to the end and flush the parser: nothing more will be written to it
    # The live file is quiet (see is_quiet): its last record is complete; flush the parser at
    # the end of the bytes, but the file may grow again (it is not finished).
    quiet: bool = False

    @property
    def offset(self) -> int:
        return int(self.known.resume.get("offset", 0)) if self.known else 0


@dataclass
class Plan:
    reads: list[Read] = field(default_factory=list)
    # Known files not finished that no longer exist under any name: they cannot be read to their end.
    vanished: list[SourceFile] = field(default_factory=list)
    # Why files could not be looked at (permissions...): shown as the source's health.
    errors: list[str] = field(default_factory=list)
    matched_any: bool = False  # the path or glob matched at least one file
    # The newest file (it may grow), and the SourceFile it continues (None: new, or finished).
    live: Candidate | None = None
    live_known: SourceFile | None = None
    looked_at: float = 0.0  # time.time() just before the files were looked at


def known_file(source: Source, read: Read) -> SourceFile | None:
    """The SourceFile a planned read continues (made for a new file); None if it is finished."""
    c = read.candidate
    known = read.known
    if known is None:
        known, _ = SourceFile.objects.get_or_create(
            source=source,
            path=str(c.path),
            head_sha256=c.head_sha256,
            defaults={
                "size": c.size,
                "compressed": c.compressed,
                "device": c.device,
                "inode": c.inode,
                "head_length": len(c.head),
                "resume": ResumePoint(0, 1).to_dict(),
                "content_head": c.head_sha256,
            },
        )
        if known.finished:
            return None
    elif known.head_length < len(c.head) and (known.device, known.inode) == (c.device, c.inode):
        # The file grew past the bytes that named it: name it by more of them from now on.
        SourceFile.objects.filter(pk=known.pk).update(
            head_sha256=c.head_sha256, head_length=len(c.head), content_head=c.head_sha256
        )
    if int(known.resume.get("offset", 0)) == 0 and not known.hashed_bytes and not known.stored_below:
        # Nothing of it read yet: is its content stored already, read by another source (an
        # upload of a file read before) or by this one under another identity (a log ingested
        # once and now followed, a small file that grew past the bytes that named it)?
        if not known.content_head:  # (an upload recorded before migration 0027)
            known.content_head = c.head_sha256
            SourceFile.objects.filter(pk=known.pk).update(content_head=c.head_sha256)
        known.stored_below = recognise(known, source.server, lambda: open_content(c, 0)[0], same_source=True)
    return known


def time_carried_into(source: Source, new: SourceFile) -> datetime | None:
    """The time a new file of a source starts with: the one the file read before it ended with.

    An old-layout general log prints a record's time only when the second changes, and the
    server keeps that second across reopening its log: after a rotation (FLUSH GENERAL LOGS, or
    a copytruncate) the new file's first records may print none, being in the second the old
    file printed last."""
    before = SourceFile.objects.filter(source=source).exclude(pk=new.pk).exclude(last_read_at=None)
    resume = before.order_by("-last_read_at", "-pk").values_list("resume", flat=True).first()
    return ResumePoint.from_dict(resume).last_time if resume else None


def log_roots() -> list[Path]:
    """The folders file sources may read in: AUDITWEB_LOG_ROOTS, and UPLOAD_DIR (uploads)."""
    return [*settings.LOG_ROOTS, Path(settings.UPLOAD_DIR).resolve()]


def inside_roots(real: str | Path, roots: list[Path]) -> bool:
    """Whether the resolved path `real` is one of `roots` or below one."""
    real = Path(real)
    return any(real == root or real.is_relative_to(root) for root in roots)


def _real_path(fd: int, name: str) -> str:
    """Where an open file really is: the kernel's name of the descriptor (Linux), which no
    symbolic link swapped after opening can change; elsewhere the path resolved now."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(name)


class OutsideRoots(PermissionError):
    """A file that is, or leads (by a symbolic link) to, a place outside the log roots."""


def open_inside_roots(name: str | Path, roots: list[Path] | None = None) -> io.BufferedReader:
    """`name` opened for reading, if it is a regular file inside the log roots once every
    symbolic link is followed; else OutsideRoots (or FileNotFoundError, IsADirectoryError...).
    Opened without blocking (a FIFO named like a log would wait forever) and checked by the
    descriptor, so a link that changes between the check and the read cannot lead out."""
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OutsideRoots(f"{name} is not a regular file")
        if not inside_roots(_real_path(fd, str(name)), log_roots() if roots is None else roots):
            raise OutsideRoots(f"{name} leads outside the log roots (AUDITWEB_LOG_ROOTS): not read")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def pattern_problem(pattern: str) -> str | None:
    """Why a file source may not follow `pattern` (None: it may): it must be absolute, without
    `..`, its folders before the first wildcard must resolve inside the log roots, and so must
    every file it matches now. Files that appear later are checked at every poll (find_candidates)."""
    if not os.path.isabs(pattern):
        return "Give an absolute path or glob on the worker's disk."
    parts = Path(pattern).parts
    if ".." in parts:
        return "Give the path without `..`."
    roots = log_roots()
    fixed = list(itertools.takewhile(lambda part: _WILDCARD.search(part) is None, parts))
    allowed = ", ".join(str(root) for root in settings.LOG_ROOTS)
    if not inside_roots(os.path.realpath(os.path.join(*fixed)), roots):
        return f"Give a path inside the log folders ({allowed}; AUDITWEB_LOG_ROOTS on the workers)."
    for name in glob.glob(pattern):
        if not inside_roots(os.path.realpath(name), roots):
            return f"{name} leads outside the log folders ({allowed}) by a symbolic link: not allowed."
    return None


def open_candidate(candidate: Candidate) -> io.BufferedReader:
    """The file a poll planned, opened again: the same file (device and inode), or FileNotFoundError.
    It was inside the roots when found; being the same file, it still is."""
    f = candidate.path.open("rb")
    st = os.fstat(f.fileno())
    if (st.st_dev, st.st_ino) != (candidate.device, candidate.inode):
        f.close()  # rotated between the plan and now (or a link swapped): the next poll sees it
        raise FileNotFoundError(f"{candidate.path} was replaced while being opened")
    return f


def _head(f: io.BufferedReader, compressed: bool) -> bytes:
    f.seek(0)
    if compressed:
        with gzip.GzipFile(fileobj=f, mode="rb") as g:
            try:
                return g.read(IDENTITY_BYTES)
            except (EOFError, OSError, zlib.error):  # a gzip still being written
                return b""
    return f.read(IDENTITY_BYTES)


def find_candidates(pattern: str, errors: list[str]) -> list[Candidate]:
    """The non-empty regular files `pattern` (a path or a glob) matches, oldest first: only those
    inside the log roots once resolved (one that leads outside is named in `errors`)."""
    found = []
    roots = log_roots()
    for name in sorted(glob.glob(pattern)):
        path = Path(name)
        try:
            with open_inside_roots(name, roots) as f:
                st = os.fstat(f.fileno())
                if st.st_size == 0:
                    continue
                compressed = f.read(2) == GZIP_MAGIC
                head = _head(f, compressed)
        except OutsideRoots as e:
            if os.path.isfile(name):  # (folders and FIFOs a glob matches are simply not logs)
                errors.append(str(e))
            continue
        except PermissionError:
            errors.append(f"permission denied reading {path}")
            continue
        except (FileNotFoundError, IsADirectoryError):  # rotated away between glob and open
            continue
        if head:
            found.append(Candidate(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime, compressed, head))
    found.sort(key=lambda c: (c.mtime, -_rotation_number(c.path)))
    return found


def _rotation_number(path: Path) -> int:
    """`general.log.3.gz` -> 3, `general.log` -> 0: breaks ties of equal times (older first)."""
    for part in reversed(path.name.split(".")):
        if part.isascii() and part.isdigit():
            return int(part)
    return 0


def plan_reads(source: Source) -> Plan:
    """What to read in this poll of a file source (docs/architecture.md, "Which file is which")."""
    plan = Plan(looked_at=time.time())  # before any stat: "quiet since" is never overstated
    candidates = find_candidates(source.path, plan.errors)
    plan.matched_any = bool(candidates) or bool(plan.errors)
    known = list(source.files.filter(head_length__gt=0).order_by("pk"))
    claimed: dict[int, Candidate] = {}  # SourceFile pk -> the candidate that is it
    rest: list[Candidate] = []
    # 1. Same inode and same first bytes (and not shorter than what was read: not truncated).
    for c in candidates:
        for k in known:
            if (
                k.pk not in claimed
                and (k.device, k.inode) == (c.device, c.inode)
                and c.head_matches(k)
                and (c.compressed or c.size >= int(k.resume.get("offset", 0)))
            ):
                claimed[k.pk] = c
                break
        else:
            rest.append(c)
    # 2. Copies of known files: read on from where the known file stopped, unless it is still there.
    new: list[Candidate] = []
    copies: dict[int, Candidate] = {}
    for c in rest:
        twin = next((k for k in known if c.head_matches(k)), None)
        if twin is None:
            new.append(c)
        elif twin.pk not in claimed and twin.pk not in copies and not twin.finished:
            copies[twin.pk] = c
    by_pk = {k.pk: k for k in known}
    order: list[tuple[Candidate, SourceFile | None]] = [(c, by_pk[pk]) for pk, c in claimed.items()]
    order += [(c, by_pk[pk]) for pk, c in copies.items()]
    order += [(c, None) for c in new]
    order.sort(key=lambda pair: (pair[0].mtime, -_rotation_number(pair[0].path)))
    live = None if source.kind == Source.Kind.UPLOAD else (order[-1][0] if order else None)
    for c, k in order:
        finish = c.compressed or c is not live
        if k is not None and k.finished:
            continue
        quiet = not finish and is_quiet(c, k, settings.INGEST_SETTLE_SECONDS, plan.looked_at)
        plan.reads.append(Read(c, k, finish, quiet))
        if c is live:
            plan.live, plan.live_known = c, k
    seen = set(claimed) | set(copies)
    plan.vanished = [k for k in known if not k.finished and k.pk not in seen]
    return plan


def is_quiet(candidate: Candidate, known: SourceFile | None, settle: float, now: float) -> bool:
    """Whether a growing file's last record is complete: the file has not grown for `settle`
    seconds before `now` and its last byte is a newline.

    "Not grown" is known from the file's modification time, or from having seen it this same
    size at a read at least `settle` ago (a clock that disagrees with the file system's, e.g.
    over NFS, then costs one more poll, never a record cut short)."""
    if candidate.compressed:
        return False
    since = candidate.mtime
    if known is not None and known.size == candidate.size and known.last_read_at is not None:
        since = min(since, known.last_read_at.timestamp())
    return now - since >= settle and ends_with_newline(candidate)


def ends_with_newline(candidate: Candidate) -> bool:
    """Whether the byte before `candidate.size` is a newline, in the file as it was planned."""
    try:
        with candidate.path.open("rb") as f:
            st = os.fstat(f.fileno())
            if (st.st_dev, st.st_ino) != (candidate.device, candidate.inode) or candidate.size < 1:
                return False  # replaced since it was looked at: the next poll sees the new one
            return os.pread(f.fileno(), 1, candidate.size - 1) == b"\n"
    except OSError:
        return False


def listing(pattern: str) -> list[tuple[str, int, int, int]]:
    """(path, device, inode, size) of each non-empty regular file `pattern` matches now, by
    stat alone: what a poll would find, without opening a file."""
    found = []
    for name in sorted(glob.glob(pattern)):
        try:
            st = os.stat(name)
        except OSError:
            continue
        if st.st_size and os.path.isfile(name):
            found.append((name, st.st_dev, st.st_ino, st.st_size))
    return found


def listing_signature(pattern: str) -> str:
    """A digest of `listing(pattern)`: equal while no file of a source appeared, vanished,
    was renamed, grew or shrank."""
    return hashlib.sha256(json.dumps(listing(pattern)).encode()).hexdigest()


def open_content(candidate: Candidate, offset: int) -> tuple[io.BufferedReader | gzip.GzipFile, int | None]:
    """The file opened at `offset` of its content, and how many bytes to read at most
    (its size when stat'ed; None for a gzip file, which does not grow)."""
    f = open_candidate(candidate)
    if candidate.compressed:
        g = gzip.GzipFile(fileobj=f, mode="rb")
        g.myfileobj = f  # closed with it, as when GzipFile opens the file itself
        g.seek(offset)  # decompresses and drops what comes before
        return g, None
    if not still_the_same(f, candidate, offset):
        f.close()  # truncated (and written again) since it was looked at: the next poll sees it
        raise FileNotFoundError(f"{candidate.path} was truncated while being opened")
    f.seek(offset)
    return f, max(0, candidate.size - offset)


def still_the_same(f: io.IOBase, candidate: Candidate, offset: int) -> bool:
    """Whether the open file is still the one planned, with at least `offset` bytes: its first
    bytes unchanged. A copytruncate keeps the inode but not the content: after it the file is
    shorter, or begins with other bytes once written again (log records carry their times)."""
    fd = f.fileno()
    if os.fstat(fd).st_size < offset:
        return False
    return os.pread(fd, len(candidate.head), 0) == candidate.head


def content_size(candidate: Candidate) -> int:
    """Bytes of content: the size on disk, or a gzip file's recorded length (modulo 4 GiB)."""
    if not candidate.compressed:
        return candidate.size
    with open_candidate(candidate) as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


@contextlib.contextmanager
def source_lock(source_id: int) -> Iterator[bool]:
    """Hold PostgreSQL's session advisory lock of a source; yields whether we got it.

    A worker killed with SIGKILL loses its connection, and PostgreSQL frees the lock.
    """
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_CLASS, source_id])
        got = bool(cur.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, source_id])
