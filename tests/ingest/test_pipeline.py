"""The file pipeline: parsing in a second process gives exactly what parsing in this one gives;
sessions go on from one file into the next; a failure in the parsing process fails the run."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from ingest.models import Event, IngestRun, SourceFile
from ingest.parsers import general_log
from ingest.parsers.general_log import GeneralLogParser
from ingest.pipeline import ingest_file, source_for_path
from ingest.tail import in_second_process

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)
SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"


def stored() -> list[tuple[object, ...]]:
    rows = Event.objects.values_list("record_hash", "user", "session__key", "statement_type", "flags")
    return sorted((bytes(h), *rest) for h, *rest in rows)


def test_the_second_process_stores_exactly_what_one_process_stores(settings) -> None:
    settings.INGEST_BATCH_SIZE = 7  # many batches through the pipe
    settings.INGEST_PARALLEL = False
    call_command("ingest", str(SCENARIO), "--server", "s", stdout=io.StringIO())
    alone = stored()
    Event.objects.all().delete()
    # (and what the file's checkpoint says is stored: exactly once rests on it since issue 22)
    SourceFile.objects.update(stored_below=0)
    settings.INGEST_PARALLEL = True
    call_command("ingest", str(SCENARIO), "--server", "s", stdout=io.StringIO())
    assert stored() == alone
    assert len(alone) > 50


def test_a_session_goes_on_from_one_file_into_the_next(tmp_path, settings) -> None:
    settings.INGEST_PARALLEL = True
    first, second = tmp_path / "general.log.1", tmp_path / "general.log"
    first.write_bytes(b"2026-01-05T09:00:00.000000Z\t   12 Connect\tdora@db1 on shop using TCP/IP\n")
    second.write_bytes(b"2026-01-05T09:00:05.000000Z\t   12 Query\tDELETE FROM orders\n")
    call_command("ingest", str(first), str(second), "--server", "s", stdout=io.StringIO())
    delete = Event.objects.get(statement_type="DELETE")
    assert (delete.user, delete.host, delete.database, delete.tables) == (
        "dora",
        "db1",
        "shop",
        ["shop.orders"],
    )
    assert "unattributed" not in delete.flags


def test_an_exception_in_the_parsing_process_fails_the_run(tmp_path, settings, monkeypatch) -> None:
    settings.INGEST_PARALLEL = True
    path = tmp_path / "general.log"
    path.write_bytes(b"2026-01-05T09:00:00.000000Z\t   12 Query\tSELECT 1\n")

    class BrokenParser(GeneralLogParser):
        def feed(self, lines):
            raise ValueError("the parser broke")
            yield  # a generator

    monkeypatch.setattr(general_log, "GeneralLogParser", BrokenParser)
    source = source_for_path(path, server="s", fmt="general-log", tz="UTC")
    with pytest.raises(RuntimeError, match="the parser broke"):
        ingest_file(path, source=source, fmt="general-log")
    run = IngestRun.objects.get()
    assert run.status == IngestRun.Status.FAILED and "the parser broke" in run.error


def test_stopping_early_kills_the_child_and_leaves_no_zombie() -> None:
    import os

    def endless():
        n = 0
        while True:
            n += 1
            yield n

    messages = in_second_process(endless)
    assert [next(messages) for _ in range(3)] == [1, 2, 3]
    messages.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left to reap
