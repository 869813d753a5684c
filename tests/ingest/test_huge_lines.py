"""Lines of any size in followed files, shared-out ranges and .gz uploads (issue 18, item 5): a
line longer than INGEST_MAX_LINE_BYTES is cut (ingest.reading) wherever a file is read, its
record keeps a bounded head and a problem says its length and hash; the resume points stay
exact byte offsets of the file, so polls and ranges store exactly what one read stores; a huge
line still being written is neither cut nor stored early. Functions called directly."""

from __future__ import annotations

import gzip
import hashlib
import os
from collections import Counter
from pathlib import Path

import pytest
from django.test import override_settings

from ingest.follow import ingest_source
from ingest.models import Event, IngestRun, ParseProblem, Source, SourceFile, Split
from ingest.pipeline import ingest_file, source_for_path
from ingest.split import read_chunk
from tests.ingest.test_split import stored

pytestmark = pytest.mark.django_db(transaction=True)

CAP = 64 * 1024  # the smallest cap settings allow
HUGE = 300_000  # bytes of filler in a huge statement: several times the cap


def general_log(n: int) -> list[bytes]:
    """`n` groups of a general log's lines, every third statement huge, some spanning lines."""
    lines = [b"2024-05-01T10:00:00.000000Z\t    7 Connect\talice@10.0.0.7 on shop using TCP/IP\n"]
    for i in range(n):
        stamp = f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}.000000Z".encode()
        lines.append(stamp + b"\t    7 Query\tSELECT %d\n" % i)
        if i % 3 == 0:
            filler = bytes([ord("a") + i % 26]) * (HUGE + i)
            lines.append(stamp + b"\t    7 Query\tDELETE FROM shop.orders WHERE note = '" + filler + b"'\n")
            lines.append(b"  AND id > %d\n" % i)  # the statement goes on on the next line
        lines.append(stamp + b"\t    7 Query\tDROP TABLE shop.t%d\n" % i)
    return lines


def audit_log(n: int) -> list[bytes]:
    lines = []
    for i in range(n):
        stamp = f"20240501 10:{i // 60:02d}:{i % 60:02d}".encode()
        lines.append(stamp + b",db1,alice,10.0.0.7,42,%d,QUERY,shop,'SELECT %d',0\n" % (3 * i, i))
        if i % 3 == 0:
            filler = bytes([ord("a") + i % 26]) * (HUGE + i)
            lines.append(
                stamp
                + b",db1,alice,10.0.0.7,42,%d,QUERY,shop,'DELETE FROM orders WHERE note = ''" % (3 * i + 1)
                + filler
                + b"''',0\n"
            )
        lines.append(stamp + b",db1,alice,10.0.0.7,42,%d,QUERY,shop,'DROP TABLE t%d',0\n" % (3 * i + 2, i))
    return lines


LOGS = {"general-log": general_log, "mariadb-audit": audit_log}


def follow(path: Path | str, fmt: str) -> Source:
    return Source.objects.create(
        name=f"followed {path}", kind=Source.Kind.FILE, path=str(path), server="db1", format=fmt
    )


def problems_of(server: str) -> Counter[tuple[object, ...]]:
    rows = ParseProblem.objects.filter(source_file__source__server=server)
    return Counter(rows.values_list("line", "offset", "reason"))


def reference(
    tmp_path: Path, data: bytes, fmt: str
) -> tuple[Counter[tuple[object, ...]], Counter[tuple[object, ...]]]:
    """What one sequential read (manage.py ingest) stores of `data`: events and problems."""
    copy = tmp_path / "reference" / "whole.log"
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes(data)
    run = ingest_file(copy, source=source_for_path(copy, server="reference", fmt=fmt, tz="UTC"), fmt=fmt)
    assert run.status == "done", run.error
    return stored("reference"), problems_of("reference")


def assert_bounded(server: str, count: int) -> None:
    """Each huge statement is stored as a bounded head, flagged, with a problem giving its length."""
    cut = Event.objects.filter(server=server, flags__contains=["cut"])
    assert cut.count() == count > 0
    for event in cut:
        assert len(event.raw) < CAP and len(event.sql) < CAP
        assert event.statement_type == "DELETE"
        assert ParseProblem.objects.filter(
            source_file=event.source_file, offset=event.byte_offset, reason__contains="record cut"
        ).exists()


@pytest.mark.parametrize("fmt", sorted(LOGS))
def test_a_followed_file_read_in_polls_stores_what_one_read_stores(
    tmp_path: Path, settings, fmt: str
) -> None:
    """The file grows in steps that end anywhere, also inside a huge line still being written."""
    settings.INGEST_MAX_LINE_BYTES = CAP
    whole = b"".join(LOGS[fmt](12))
    want, want_problems = reference(tmp_path, whole, fmt)
    log = tmp_path / "live.log"
    source = follow(log, fmt)
    huge_at = whole.index(b"DELETE FROM") + 1000  # inside the first huge line
    steps = [huge_at, huge_at + CAP, len(whole) // 2 + 7, len(whole) - 50, len(whole)]
    with open(log, "wb") as f:
        written = 0
        for step in steps:
            f.write(whole[written:step])
            f.flush()
            written = step
            run = ingest_source(source.pk)
            assert run is not None and run.status == IngestRun.Status.DONE, run and run.error
            known = SourceFile.objects.get(source=source)
            # A resume point is always the start of a line of the file, never inside one.
            resume = int(known.resume["offset"])
            assert resume <= step and (resume == 0 or whole[resume - 1 : resume] == b"\n")
            if step == huge_at + CAP:  # the huge line is still being written: not cut, not stored
                assert not Event.objects.filter(server="db1", flags__contains=["cut"]).exists()
                assert not ParseProblem.objects.filter(source_file=known).exists()
    got = stored("db1")
    if fmt == "general-log":
        # Its last record stays pending in a file that may still grow: a next line may continue it.
        got[max(want, key=lambda row: row[14])] += 1
    assert got == want
    assert problems_of("db1") == want_problems
    assert_bounded("db1", 4)


@pytest.mark.parametrize("fmt", sorted(LOGS))
def test_ranges_cut_inside_huge_lines_store_what_one_read_stores(tmp_path: Path, settings, fmt: str) -> None:
    settings.INGEST_MAX_LINE_BYTES = CAP
    whole = b"".join(LOGS[fmt](9))
    want, want_problems = reference(tmp_path, whole, fmt)
    log = tmp_path / "rotated.log.1"
    log.write_bytes(whole)
    os.utime(log, (1_700_000_000, 1_700_000_000))
    (tmp_path / "rotated.log").write_bytes(whole.splitlines(keepends=True)[-1])  # a newer file
    source = follow(tmp_path / "rotated.log*", fmt)
    queued: list[int] = []
    with override_settings(INGEST_SPLIT_BYTES=1, INGEST_CHUNK_BYTES=50_000):
        ingest_source(source.pk, dispatch=queued.append)
        assert len(queued) > 3
        for chunk_id in reversed(queued):
            assert read_chunk(chunk_id)
    assert Split.objects.get(source=source).finished_at is not None
    assert stored("db1", log) == want
    assert problems_of("db1") == want_problems  # each cut said once, at the same place
    assert_bounded("db1", 3)


def test_an_upload_with_a_huge_line_in_a_small_gz_is_cut_and_goes_on(tmp_path: Path, settings) -> None:
    """32 MiB of one statement in a .gz of about 32 KB, read as an upload is (a source's file)."""
    settings.INGEST_MAX_LINE_BYTES = CAP
    head = b"2024-05-01T10:00:01.000000Z\t    7 Query\tDELETE FROM shop.orders WHERE note = '"
    filler = b"y" * (1 << 20)
    after = b"2024-05-01T10:00:02.000000Z\t    7 Query\tDROP TABLE shop.customers\n"
    path = tmp_path / "upload.log.gz"
    digest = hashlib.sha256(head)
    with gzip.open(path, "wb", compresslevel=9) as gz:
        gz.write(head)
        for _ in range(32):
            gz.write(filler)
            digest.update(filler)
        gz.write(b"'\n" + after + after.replace(b"customers", b"suppliers"))
    digest.update(b"'\n")
    length = len(head) + 32 * len(filler) + 2
    assert path.stat().st_size < 200_000
    source = Source.objects.create(
        name="upload", kind=Source.Kind.UPLOAD, path=str(path), server="up", format="auto"
    )
    run = ingest_source(source.pk)
    assert run is not None and run.status == IngestRun.Status.DONE, run and run.error
    delete, drop, drop2 = Event.objects.filter(server="up").order_by("byte_offset")
    assert (drop.byte_offset, drop2.byte_offset) == (length, length + len(after))  # the file went on
    assert bytes(delete.raw).startswith(head) and len(delete.raw) < CAP and "cut" in delete.flags
    (problem,) = ParseProblem.objects.filter(source_file__source=source)
    assert problem.offset == 0 and f"holds {length} bytes (sha256 {digest.hexdigest()})" in problem.reason
    assert SourceFile.objects.get(source=source).bytes_read == length + 2 * len(after)
