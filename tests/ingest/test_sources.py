"""Sources followed over time, one poll at a time (ingest.follow.ingest_source called directly):
growing files, rotations, truncation, replaced files. The real-worker tests are in
tests/test_continuous.py."""

from __future__ import annotations

import gzip
import os
from collections import Counter
from pathlib import Path

import pytest

from ingest.follow import ingest_source
from ingest.models import Event, IngestRun, ParseProblem, Source, SourceFile
from ingest.pipeline import ingest_file, source_for_path
from tests.logwriter import GeneralLogWriter, rotate_copytruncate, rotate_rename

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def never_quiet(settings):
    """These tests are about the last record waiting for the next line: however slow the machine,
    no file here stays unchanged long enough to be quiet (tests/ingest/test_quiet_tail.py)."""
    settings.INGEST_SETTLE_SECONDS = 3600


def events_of(server: str) -> Counter[tuple[object, ...]]:
    """Every event of a server, as what it says (not where it was read)."""
    rows = Event.objects.filter(server=server).values_list(
        "occurred_at",
        "connection_id",
        "command",
        "user",
        "host",
        "database",
        "statement_type",
        "sql",
        "destructive",
    )
    return Counter(rows)


def straight_ingest(tmp_path: Path, content: bytes) -> Counter[tuple[object, ...]]:
    """What `ingest` stores from the concatenated files, for comparison."""
    whole = tmp_path / "reference" / "all.log"
    whole.parent.mkdir(exist_ok=True)
    whole.write_bytes(content)
    source = source_for_path(whole, server="reference", fmt="general-log", tz="UTC")
    ingest_file(whole, source=source, fmt="general-log")
    return events_of("reference")


def follow(path: str, **fields: object) -> Source:
    return Source.objects.create(
        name=f"followed {path}",
        kind=Source.Kind.FILE,
        path=path,
        server="db1",
        format="general-log",
        **fields,
    )


def test_it_reads_only_what_was_appended_and_holds_back_a_half_written_line(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(300)
    source = follow(str(log))
    first = ingest_source(source.pk)
    assert first is not None and first.status == IngestRun.Status.DONE
    stored_first = Event.objects.filter(server="db1").count()
    # The last record stays pending: the next line may continue it.
    assert stored_first == 300  # the banner and 299 records
    with log.open("ab") as f:
        f.write(writer.record() + writer._stamp() + b"\t  100 Query\tSELECT 'half")
    ingest_source(source.pk)
    with log.open("ab") as f:
        f.write(b" written'\n")
    writer.write(200)
    ingest_source(source.pk)
    assert ingest_source(source.pk) is None  # nothing new: no run at all
    whole = log.read_bytes()
    reference = straight_ingest(tmp_path, whole)
    mine = events_of("db1")
    last = max(reference, key=lambda row: row[0])  # pending: nothing says it is complete
    assert mine + Counter([last]) == reference
    assert Event.objects.filter(server="db1", sql="SELECT 'half written'").count() == 1


def test_it_follows_rename_rotations_reading_the_old_file_to_its_end(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    source = follow(str(log) + "*")
    content = b""
    for _ in range(3):
        writer.write(400)
        ingest_source(source.pk)
        writer.write(150)  # written after the poll, before the rotation
        old = rotate_rename(log)
        writer.write(20)  # the server still writes to the renamed file until it reopens
        writer.reopen()
        content += old.read_bytes()
    writer.write(100)
    ingest_source(source.pk)
    ingest_source(source.pk)
    content += log.read_bytes()
    reference = straight_ingest(tmp_path, content)
    last = max(reference, key=lambda row: row[0])
    assert events_of("db1") + Counter([last]) == reference
    assert SourceFile.objects.filter(source=source, finished=True).count() == 3


def test_it_follows_copytruncate_without_loss_or_duplicates(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    source = follow(str(log) + "*")
    content = b""
    for _ in range(2):
        writer.write(400)
        ingest_source(source.pk)
        writer.write(150)
        old = rotate_copytruncate(log)
        content += old.read_bytes()
        writer.write(50)  # lands at the start of the truncated file
        ingest_source(source.pk)
    writer.write(10)
    ingest_source(source.pk)
    content += log.read_bytes()
    reference = straight_ingest(tmp_path, content)
    last = max(reference, key=lambda row: row[0])
    assert events_of("db1") + Counter([last]) == reference


@pytest.mark.parametrize("when", ["before it is opened", "while it is read"])
def test_a_copytruncate_between_planning_and_reading_loses_nothing(
    tmp_path: Path, monkeypatch, when: str
) -> None:
    """The worker looked at the file (size, first bytes), then logrotate copied and truncated it
    and the server wrote again, before or while the worker read it: same inode, other bytes."""
    from ingest import follow as following

    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    source = follow(str(log) + "*")
    writer.write(300)
    ingest_source(source.pk)
    writer.write(300)
    content = b""
    real_read_file, real_tail = following._read_file, following.tail_messages

    def rotate_and_refill() -> bytes:
        old = rotate_copytruncate(log)
        writer.write(800)  # lands at the start of the truncated file, and past the offsets read
        return old.read_bytes()

    def rotated_before_opening(*args, **kwargs):
        nonlocal content
        content = content or rotate_and_refill()
        return real_read_file(*args, **kwargs)

    def rotated_after_first_batch(*args, **kwargs):
        nonlocal content
        for n, message in enumerate(real_tail(*args, **kwargs)):
            yield message
            if n == 0 and not content:
                content = rotate_and_refill()

    if when == "before it is opened":
        monkeypatch.setattr(following, "_read_file", rotated_before_opening)
    else:
        monkeypatch.setattr(following, "tail_messages", rotated_after_first_batch)
    monkeypatch.setattr(following.settings, "INGEST_PARALLEL", False)
    monkeypatch.setattr(following.settings, "INGEST_BATCH_SIZE", 100)
    ingest_source(source.pk)  # the poll that planned before the rotation
    monkeypatch.undo()
    writer.write(10)
    ingest_source(source.pk)
    ingest_source(source.pk)
    assert content
    content += log.read_bytes()
    reference = straight_ingest(tmp_path, content)
    last = max(reference, key=lambda row: row[0])
    assert events_of("db1") + Counter([last]) == reference


def test_it_reads_a_gzipped_rotation_it_had_not_finished(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(300)
    source = follow(str(log) + "*")
    ingest_source(source.pk)
    writer.write(100)
    writer.close()
    whole = log.read_bytes()
    with gzip.open(tmp_path / "general.log.1.gz", "wb") as g:
        g.write(whole)
    log.unlink()
    ingest_source(source.pk)
    assert events_of("db1") == straight_ingest(tmp_path, whole)


def test_a_file_replaced_by_another_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(200)
    writer.close()
    source = follow(str(log))
    ingest_source(source.pk)
    first = log.read_bytes()
    replacement = tmp_path / "new.log"
    GeneralLogWriter(replacement, start=writer.time).write(50)
    os.replace(replacement, log)  # same name, another file, shorter than what was read
    ingest_source(source.pk)
    assert SourceFile.objects.filter(source=source).count() == 2
    events = events_of("db1")
    reference = straight_ingest(tmp_path, first + log.read_bytes())
    # Each file's last record waits (nothing marks the first finished: it is simply gone).
    assert sum(events.values()) == sum(reference.values()) - 2
    assert not (events - reference)


def test_a_file_that_vanished_half_read_is_a_problem_of_the_run(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    GeneralLogWriter(log).write(100)
    source = follow(str(log))
    ingest_source(source.pk)
    log.unlink()
    run = ingest_source(source.pk)
    assert run is not None and run.problems == 1
    problem = ParseProblem.objects.get(run=run)
    assert "vanished" in problem.reason
    assert Source.objects.get(pk=source.pk).last_error == f"no file matches {log}"


def test_reading_the_same_bytes_again_stores_nothing(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    GeneralLogWriter(log).write(500)
    source = follow(str(log))
    ingest_source(source.pk)
    before = Event.objects.count()
    # Forget where it was: the next poll reads the whole file again.
    SourceFile.objects.filter(source=source).update(resume={}, size=0)
    Source.objects.filter(pk=source.pk).update(checkpoint={})
    run = ingest_source(source.pk)
    assert run is not None and run.events_seen > 0 and run.events_stored == 0
    assert Event.objects.count() == before
