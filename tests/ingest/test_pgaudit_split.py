"""A pgAudit backlog shared out between workers (ingest.split): ranges cut where the parser
says it may resume, read in any order, store what one read stores."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from django.test import override_settings

from ingest.follow import ingest_source
from ingest.models import IngestRun, Source, Split
from ingest.split import read_chunk
from tests.ingest.test_split import gaps_of, reference, stored
from tests.parsers.test_pgaudit import interleaved

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("suffix", [".csv", ".json", ".log"])
def test_a_pgaudit_backlog_read_in_ranges_backwards_stores_what_one_read_stores(
    tmp_path: Path, suffix: str
) -> None:
    """The scene's first file, with another session's login inside a statement, cut every
    512 bytes and read last range first; a newer file follows it, so it is read to its end."""
    log = tmp_path / f"postgresql-1{suffix}"
    log.write_bytes(interleaved(suffix))
    os.utime(log, (1_700_000_000, 1_700_000_000))
    newer = tmp_path / f"postgresql-2{suffix}"
    newer.write_bytes(log.read_bytes().splitlines(keepends=True)[-1])  # not its head
    source = Source.objects.create(
        name="followed pg", kind=Source.Kind.FILE, path=str(tmp_path / f"postgresql-*{suffix}"), server="db1"
    )
    queued: list[int] = []
    with override_settings(INGEST_SPLIT_BYTES=1, INGEST_CHUNK_BYTES=512):
        run = ingest_source(source.pk, dispatch=queued.append)
        assert run is not None and run.status == IngestRun.Status.RUNNING
        split = Split.objects.get(source=source)
        assert len(queued) == split.chunks.count() > 10
        for chunk_id in reversed(queued):
            assert read_chunk(chunk_id)
    split.refresh_from_db()
    assert split.finished_at is not None
    want_events, want_gaps = reference(tmp_path, log, "auto")
    assert stored("db1", log) == want_events and sum(want_events.values()) > 50
    assert gaps_of("db1", log) == want_gaps and sum(want_gaps.values()) > 0
    # Each range ended where the next begins. (Not always in the state the next begins in: where
    # the scan cut after a statement other sessions' lines interrupt, the next range reads it again
    # whole, as a resumed poll does: see docs/architecture.md "PostgreSQL pgAudit".)
    chunks = list(split.chunks.order_by("number"))
    for before, after in itertools.pairwise(chunks):
        if before.source_file_id == after.source_file_id:
            assert before.resume["offset"] == after.start["offset"]
