"""The quiet tail: a followed file that stopped growing, with a newline as its last byte, has its
last record stored (ingest.checkpoints.is_quiet), in every format a source follows; lines that
would have continued it, written later against the servers' rule, are neither lost nor stored
twice; and beat's look at the followed files (ingest.follow.look_at_followed_files) polls a
source only when its files changed or its quiet tail is due. Functions called directly; the
real-worker test is tests/test_live_tail.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ingest.follow import ingest_source, look_at_followed_files
from ingest.models import Event, ParseProblem, Source, SourceFile
from tests.conftest import CORPUS_MISSING, FIXTURES, SHARED
from tests.ingest.test_split import reference, stored
from tests.logwriter import GeneralLogWriter

pytestmark = pytest.mark.django_db(transaction=True)

CRIME_SCENE = FIXTURES / "crime_scene"
CORPUS = SHARED / "corpus"


def follow(path: Path | str, fmt: str = "general-log") -> Source:
    return Source.objects.create(
        name=f"followed {path}", kind=Source.Kind.FILE, path=str(path), server="db1", format=fmt
    )


def written_ago(path: Path, seconds: float) -> None:
    """Give the file the modification time it has when it was last written `seconds` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def sqls() -> list[str]:
    return list(Event.objects.filter(server="db1").order_by("byte_offset").values_list("sql", flat=True))


def test_the_last_record_waits_while_the_file_is_fresh_and_is_stored_once_it_is_quiet(
    tmp_path: Path, settings
) -> None:
    settings.INGEST_SETTLE_SECONDS = 1
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(200)
    writer.f.write(writer._stamp() + b"\t  100 Query\tDELETE FROM orders WHERE id = 42\n")
    writer.f.flush()
    source = follow(log)
    ingest_source(source.pk)
    # Just written: the next line might still continue it.
    assert "DELETE FROM orders WHERE id = 42" not in sqls()
    time.sleep(1.2)  # the settle time passes on the real clock, the file untouched
    run = ingest_source(source.pk)
    assert run is not None and run.events_stored == 1
    assert sqls()[-1] == "DELETE FROM orders WHERE id = 42"
    assert ingest_source(source.pk) is None  # nothing pending any more: no run at all
    # The log goes on: what follows is read from after that record, once.
    writer.write(30)
    time.sleep(1.2)
    ingest_source(source.pk)
    want, _ = reference(tmp_path, log, "general-log")
    assert stored("db1") == want
    assert not ParseProblem.objects.exists()


# (fixture file, format): every format a source can follow.
FORMATS = [
    (CRIME_SCENE / "mariadb-10.11.19-general.log", "general-log"),
    (CRIME_SCENE / "mariadb-10.11.19-server_audit.log", "mariadb-audit"),
    (CRIME_SCENE / "mariadb-10.11.19-general_log-1.CSV", "general-log-csv"),
    (CRIME_SCENE / "mariadb-10.11.19-general_log-1.tsv", "general-log-tsv"),
    (CORPUS / "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_sample-array.json", "json-audit"),
    (CORPUS / "percona-audit/psmysql-docs_audit-log-plugin_JSON_query_indented.json.txt", "json-audit"),
    (CORPUS / "mysql-enterprise-audit/mysql-docs-8.0_audit-log_NEW-xml_sample.xml", "xml-audit"),
    (CORPUS / "percona-audit/psmysql-docs_audit-log-plugin_CSV_query_indented.csv.txt", "audit-csv"),
]


@pytest.mark.parametrize(("sample", "fmt"), FORMATS, ids=[f"{f}-{p.name[:30]}" for p, f in FORMATS])
def test_every_followed_format_stores_its_last_record_once_quiet(
    tmp_path: Path, settings, sample: Path, fmt: str
) -> None:
    if not sample.is_file():
        pytest.skip(CORPUS_MISSING)
    settings.INGEST_SETTLE_SECONDS = 30
    log = tmp_path / sample.name
    data = sample.read_bytes()
    assert data.endswith(b"\n")
    log.write_bytes(data)
    source = follow(log, fmt)
    ingest_source(source.pk)  # fresh: whatever waits for a next line waits
    fresh = stored("db1")
    written_ago(log, 60)
    ingest_source(source.pk)
    want, _ = reference(tmp_path, log, fmt)
    assert stored("db1") == want  # all of it, each once, exactly as one read of the whole file
    assert sum(want.values()) > sum(fresh.values()) or fmt != "general-log"
    assert SourceFile.objects.get(source=source).resume["offset"] == len(data)


def test_a_half_written_last_line_is_no_quiet_end(tmp_path: Path, settings) -> None:
    settings.INGEST_SETTLE_SECONDS = 1
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(20)
    last = writer.record()
    writer.f.write(last + writer._stamp() + b"\t  100 Query\tDELETE FROM orders WHERE")
    writer.f.flush()
    written_ago(log, 60)
    source = follow(log)
    ingest_source(source.pk)
    # The half line may continue the record before it: both wait, however long it is quiet.
    assert len(sqls()) == 21  # the banner and the 20 records before `last`
    writer.f.write(b" id = 1\n")
    writer.f.flush()
    written_ago(log, 60)
    ingest_source(source.pk)
    want, _ = reference(tmp_path, log, "general-log")
    assert stored("db1") == want
    assert sqls()[-1] == "DELETE FROM orders WHERE id = 1"


def test_lines_that_continue_a_record_stored_at_a_quiet_tail_are_a_problem_and_flag_it(
    tmp_path: Path, settings
) -> None:
    """A log written by hand (or damaged): the record looked complete, and was stored; then
    more of it came. Nothing is lost (the lines are a Problem at their own position, the file's
    hash covers them) and nothing is stored twice (the record stays as stored, flagged)."""
    settings.INGEST_SETTLE_SECONDS = 1
    log = tmp_path / "general.log"
    connect = b"2026-03-01T09:00:00.000001Z\t  100 Connect\tbob@10.0.0.1 on shop using TCP/IP\n"
    delete = b"2026-03-01T09:00:01.000001Z\t  100 Query\tDELETE FROM orders\n"
    log.write_bytes(connect + delete)
    written_ago(log, 60)
    source = follow(log)
    ingest_source(source.pk)
    event = Event.objects.get(server="db1", statement_type="DELETE")
    assert event.sql == "DELETE FROM orders" and "no_where" in event.flags
    more = b"WHERE id = 7\n  AND note = 'x'\n"
    quit_ = b"2026-03-01T09:00:02.000001Z\t  100 Quit\t\n"
    with log.open("ab") as f:
        f.write(more + quit_)
    written_ago(log, 60)
    ingest_source(source.pk)
    problem = ParseProblem.objects.get()
    assert (problem.line, problem.offset) == (3, len(connect + delete))
    assert bytes(problem.excerpt) == more
    assert "continue the record at line 2" in problem.reason
    event.refresh_from_db()
    assert "continued_after_quiet" in event.flags and event.sql == "DELETE FROM orders"
    commands = list(Event.objects.filter(server="db1").order_by("line").values_list("command", "line"))
    assert commands == [("Connect", 1), ("Query", 2), ("Quit", 5)]
    assert SourceFile.objects.get(source=source).resume["offset"] == log.stat().st_size


def test_the_continuation_is_recognised_even_when_it_comes_in_two_writes(tmp_path: Path, settings) -> None:
    settings.INGEST_SETTLE_SECONDS = 1
    log = tmp_path / "general.log"
    head = b"2026-03-01T09:00:01.000001Z\t  100 Query\tUPDATE stock SET qty = 0\n"
    log.write_bytes(head)
    written_ago(log, 60)
    source = follow(log)
    ingest_source(source.pk)
    with log.open("ab") as f:
        f.write(b"WHERE item")  # half a line: nothing to read yet
    ingest_source(source.pk)
    with log.open("ab") as f:
        f.write(b" = 3\n")
    written_ago(log, 60)
    ingest_source(source.pk)
    problem = ParseProblem.objects.get()
    assert problem.offset == len(head) and "continue the record at line 1" in problem.reason
    assert "continued_after_quiet" in Event.objects.get(server="db1").flags


def test_beat_polls_a_followed_file_only_when_it_changed_or_its_quiet_tail_is_due(
    tmp_path: Path, settings
) -> None:
    settings.INGEST_SETTLE_SECONDS = 1
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(50)
    source = follow(str(log) + "*")
    Source.objects.create(name="off", path=str(log), server="db2", format="general-log", enabled=False)

    def looked() -> list[int]:
        queued: list[int] = []
        look_at_followed_files(queued.append)
        return queued

    assert looked() == [source.pk]  # never polled
    ingest_source(source.pk)
    assert looked() == []  # polled, unchanged, its tail not yet quiet long enough
    writer.write(5)
    assert looked() == [source.pk]  # grew
    assert looked() == [source.pk]  # (until a poll has looked)
    ingest_source(source.pk)
    assert looked() == []
    time.sleep(1.2)
    assert looked() == [source.pk]  # the pending last record may be settled now
    ingest_source(source.pk)
    assert looked() == []  # stored: nothing more to do until the file changes
    (tmp_path / "general.log.1").write_bytes(b"x\n")
    assert looked() == [source.pk]  # a new file
    assert look_at_followed_files(lambda _: None, skip=[source.pk]) == 0  # (queued by its interval)


MARIADB_BANNER = (
    b"/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:\n"
    b"Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\n"
    b"Time\t\t    Id Command\tArgument\n"
)


def test_a_new_file_after_a_rotation_goes_on_in_the_second_the_old_one_printed_last(
    tmp_path: Path, settings
) -> None:
    """MariaDB prints a record's time only when the second changes, and keeps that second when it
    reopens its log: after FLUSH GENERAL LOGS the new file starts with a banner and records that
    print no time. They are in the second the old file printed last (as one read of both says)."""
    settings.INGEST_SETTLE_SECONDS = 0
    log = tmp_path / "general.log"
    old = MARIADB_BANNER + (
        b"261124 20:14:14\t    155 Connect\troot@localhost on la_tail using Socket\n"
        b"261124 20:14:15\t    155 Query\tINSERT INTO t VALUES (1, 0)\n"
    )
    new = MARIADB_BANNER + b"\t\t    155 Query\tDELETE FROM t WHERE id = 1\n"
    log.write_bytes(old)
    source = follow(str(log) + "*")
    ingest_source(source.pk)
    log.rename(tmp_path / "general.log.1")  # logrotate, then FLUSH GENERAL LOGS
    log.write_bytes(new)
    ingest_source(source.pk)
    both = tmp_path / "both.log"
    both.write_bytes(old + new)
    want, _ = reference(tmp_path, both, "general-log")
    assert {row[:8] for row in stored("db1")} == {row[:8] for row in want}
    assert sum(stored("db1").values()) == sum(want.values()) == 5
    delete = Event.objects.get(server="db1", statement_type="DELETE")
    assert delete.occurred_at == Event.objects.get(server="db1", statement_type="INSERT").occurred_at
