"""Where an investigator sees the chain of custody: the event, source and run pages."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ingest.models import CustodyHead, CustodyLink, Event, IngestRun, Source, SourceFile
from ingest.pipeline import ingest_file, source_for_path
from tests.conftest import FIXTURES

pytestmark = pytest.mark.django_db

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"


@pytest.fixture
def ingested(tmp_path: Path) -> Source:
    path = tmp_path / "general.log"
    path.write_bytes(SCENARIO.read_bytes())
    source = source_for_path(path, server="db1", fmt="general-log", tz="UTC")
    ingest_file(path, source=source, fmt="general-log")
    return source


def test_the_event_page_shows_the_file_hash_and_the_batch_link_of_the_chain(
    investigator_client, ingested
) -> None:
    event = Event.objects.filter(destructive=True).first()
    assert event is not None
    page = investigator_client.get(f"/events/{event.pk}/").content.decode()
    whole = hashlib.sha256(SCENARIO.read_bytes()).hexdigest()
    assert f"file SHA-256 {whole} over its first {len(SCENARIO.read_bytes()):,} bytes" in page
    link = CustodyLink.objects.get(kind=CustodyLink.Kind.EVENTS)
    assert f"stored in the batch of link {link.seq} of the custody chain" in page
    assert f"link hash {bytes(link.hash).hex()}" in page
    assert f"manage.py verify_evidence --source {ingested.pk}" in page


def test_the_source_page_shows_the_chain_head_and_the_run_page_the_file_hash(
    investigator_client, ingested
) -> None:
    head = CustodyHead.objects.get(source=ingested)
    page = investigator_client.get(f"/sources/{ingested.pk}/").content.decode()
    assert f"{head.seq} link(s)" in page and bytes(head.hash).hex() in page
    assert SourceFile.objects.get().sha256 in page
    run = IngestRun.objects.get(source=ingested)
    page = investigator_client.get(f"/sources/runs/{run.pk}/").content.decode()
    assert "75 event(s) in 1 batch(es), links 1 to 1 of the source's chain" in page
    assert f"SHA-256 {SourceFile.objects.get().sha256} over its first" in page
