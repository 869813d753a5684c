"""A followed source shows the gaps `manage.py ingest` shows for the same bytes: logging switched
off by the last statement read is an open gap as soon as that statement is stored, and the
record that a later poll reads after logging came back closes it. Real MariaDB 10.11 log
(tests/fixtures/reenable/regenerate.py): it switches logging off and on several times and ends
switched off."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from ingest.follow import ingest_source
from ingest.models import Gap, Source

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)
LOG = FIXTURES / "reenable" / "mariadb-10.11.19-general.log"
LINES = LOG.read_bytes().splitlines(keepends=True)
# Where the log ends switched off (the whole log), and where it ends after logging came back on
# (line 22: root's Connect, after re_mallory's last switch-off and the log reopened).
ENDS_OFF, ENDS_ON = len(LINES), 22
OFF_LINE = 6  # re_mallory's first SET GLOBAL general_log = OFF


def gaps(server: str) -> list[tuple[object, ...]]:
    rows = Gap.objects.filter(server=server).order_by("line", "reason")
    return list(rows.values_list("reason", "started_at", "ended_at", "line", "byte_offset", "detail"))


def ingested(tmp_path: Path, data: bytes) -> list[tuple[object, ...]]:
    path = tmp_path / "ingested" / "general.log"
    path.parent.mkdir()
    path.write_bytes(data)
    call_command("ingest", str(path), "--server", "ref", "--timezone", "UTC", stdout=io.StringIO())
    return gaps("ref")


def poll(path: Path, source: Source) -> None:
    then = time.time() - 60  # quiet: its last record is complete and is stored
    os.utime(path, (then, then))
    ingest_source(source.pk)


def follow(tmp_path: Path) -> tuple[Path, Source]:
    path = tmp_path / "followed" / "general.log"
    path.parent.mkdir()
    source = Source.objects.create(
        name="followed", kind=Source.Kind.FILE, path=str(path), server="db1", format="general-log"
    )
    return path, source


@pytest.mark.parametrize("end", [ENDS_OFF, ENDS_ON], ids=["ends-off", "ends-on"])
@pytest.mark.parametrize("split", [None, OFF_LINE, 12], ids=["one-poll", "after-switch-off", "middle"])
def test_a_followed_file_has_the_gaps_its_ingest_has(tmp_path: Path, end: int, split: int | None) -> None:
    data = b"".join(LINES[:end])
    want = ingested(tmp_path, data)
    path, source = follow(tmp_path)
    with path.open("wb") as f:
        f.write(b"".join(LINES[:split]) if split else data)
    poll(path, source)
    if split:
        with path.open("ab") as f:
            f.write(b"".join(LINES[split:end]))
        poll(path, source)
    assert gaps("db1") == want
    open_gaps = [g for g in want if g[0] == "logging_off" and g[2] is None]
    assert len(open_gaps) == (1 if end == ENDS_OFF else 0)


def test_the_switch_off_read_last_is_an_open_gap_at_once_and_closed_by_the_next_poll(
    tmp_path: Path,
) -> None:
    path, source = follow(tmp_path)
    path.write_bytes(b"".join(LINES[:OFF_LINE]))
    poll(path, source)
    (off,) = Gap.objects.filter(server="db1")
    assert (off.reason, off.line, off.ended_at) == ("logging_off", OFF_LINE, None)
    assert "SET GLOBAL general_log = OFF" in off.detail
    poll(path, source)  # nothing new: still open, still one row
    assert list(Gap.objects.filter(server="db1").values_list("pk", "ended_at")) == [(off.pk, None)]
    with path.open("ab") as f:
        f.write(b"".join(LINES[OFF_LINE:10]))  # the log reopened, and re_mallory's next statement
    poll(path, source)
    off.refresh_from_db()
    assert off.ended_at is not None
    assert Gap.objects.filter(server="db1", reason="logging_off").count() == 1
