"""A followed Percona CSV audit log read while a record over several lines is half written: the
read stops before that record and reads it whole next time, from its offset. Functions called
directly, on the conformance sample (tests/fixtures/audit-csv)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.follow import ingest_source
from ingest.models import Event, ParseProblem, SourceFile
from tests.conftest import FIXTURES
from tests.ingest.test_split import follow, reference, stored

pytestmark = pytest.mark.django_db(transaction=True)

SAMPLE = FIXTURES / "audit-csv" / "mariadb-10.11.19-percona.csv"


def test_a_record_half_written_over_lines_is_read_once_whole_when_the_rest_comes(
    tmp_path: Path, settings
) -> None:
    settings.INGEST_SETTLE_SECONDS = 30  # the file is fresh: its end may be a record in writing
    data = SAMPLE.read_bytes()
    lines = data.splitlines(keepends=True)
    # The first record over several lines: the SELECT over four lines, whose quote the first
    # of them leaves open.
    first = next(n for n, line in enumerate(lines) if line.count(b'"') % 2)
    cut = sum(len(line) for line in lines[: first + 2])  # the file ends after two of its lines
    log = tmp_path / SAMPLE.name
    log.write_bytes(data[:cut])
    source = follow(log, "audit-csv")
    ingest_source(source.pk)
    before = list(Event.objects.filter(server="db1").values_list("line", flat=True))
    assert sorted(before) == list(range(1, first + 1))  # every record before it, and it not yet
    assert not ParseProblem.objects.exists()
    assert SourceFile.objects.get(source=source).resume["offset"] == sum(len(x) for x in lines[:first])
    with log.open("ab") as f:
        f.write(data[cut:])
    ingest_source(source.pk)
    want, _ = reference(tmp_path, log, "audit-csv")
    assert stored("db1") == want  # each record once, as one read of the whole file has them
    assert Event.objects.filter(server="db1", line=first + 1, sql__contains="\n").count() == 1
    assert not ParseProblem.objects.exists()
