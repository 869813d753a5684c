"""Records missing from a log, proven by the log's own dense counter: gaps of reason `sequence`.

Real logs only: the servers' samples in the shared corpus (read in place) and the fixtures
recorded from the real MariaDB here. A culprit who deletes records from a copy of a real log is
simulated by deleting them, the rest of the bytes untouched.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import call_command

from ingest.events import EventRecord, GapRecord
from ingest.models import Gap
from ingest.normalize import SEQUENCE_WINDOW, GapFinder, SessionTracker, classify_events
from ingest.parsers import by_name, json_audit
from ingest.parsers.detect import HEAD_BYTES, UnknownFormat, detect_format
from ingest.parsers.records import Hints

from ..conftest import CORPUS_MISSING, FIXTURES, SHARED

CORPUS = SHARED / "corpus"
ENTERPRISE_JSON = CORPUS / "mysql-enterprise-audit" / "filebeat_mysqlenterprise_mysql_audit_test.log"
FILTER_XML = CORPUS / "percona-audit" / "psmysql-docs_audit-log-filter_8.0_OLD-xml.xml"
DOCS_XML = CORPUS / "mysql-enterprise-audit" / "mysql-docs-8.0_audit-log_NEW-xml_sample.xml"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=CORPUS_MISSING)
HINTS = Hints(mtime_year=2024)


def read(data: bytes, finder: GapFinder | None = None) -> tuple[list[EventRecord], list[GapRecord]]:
    """Every event and gap of a log given as bytes, as the pipeline reads it (no store)."""
    fmt = detect_format(data[:65536])
    tracker, finder = SessionTracker("db1"), finder or GapFinder()
    lines = data.splitlines(keepends=True)
    items = list(finder.process(classify_events(tracker.process(by_name(fmt).parse(lines, hints=HINTS)))))
    return [i for i in items if isinstance(i, EventRecord)], [i for i in items if isinstance(i, GapRecord)]


def sequence_gaps(data: bytes) -> list[tuple[object, ...]]:
    return [(g.started_at, g.ended_at, g.line) for g in read(data)[1] if g.reason == "sequence"]


def without_lines(data: bytes, *numbers: int) -> bytes:
    """The log with these lines (1-based) deleted, every other byte as it was."""
    return b"".join(line for n, line in enumerate(data.splitlines(keepends=True), 1) if n not in numbers)


def _is_log_of_ours(path: Path) -> bool:
    """A sample of a registered format (not a script, a truth, or a format not read yet)."""
    if path.suffix in (".py", ".md", ".sql", ".conf") or path.name == "truth.json" or not path.is_file():
        return False
    try:
        detect_format(path.read_bytes()[:HEAD_BYTES])
    except UnknownFormat:
        return False
    return True


REAL_FIXTURES = sorted(p for p in FIXTURES.glob("*/*") if _is_log_of_ours(p))


@pytest.mark.parametrize("path", REAL_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_untouched_real_logs_have_no_sequence_gap(path: Path) -> None:
    assert sequence_gaps(path.read_bytes()) == []


@needs_corpus
@pytest.mark.parametrize(
    "path",
    # (the hard-wrapped CSV sample is no log a reader can recognise: left out)
    [
        ENTERPRISE_JSON,
        FILTER_XML,
        *sorted((CORPUS / "percona-audit").glob("*[!v].txt")),
        *sorted((CORPUS / "percona-audit").glob("*.x*")),
    ],
    ids=lambda p: p.name,
)
def test_the_untouched_product_samples_have_no_sequence_gap(path: Path) -> None:
    assert sequence_gaps(path.read_bytes()) == []


@needs_corpus
def test_a_record_deleted_from_a_real_mysql_enterprise_log_is_a_gap() -> None:
    data = ENTERPRISE_JSON.read_bytes()
    lines = data.splitlines()
    # 19:31:40 has four records, ids 0 to 3: the culprit deletes id 1 (a DROP, say).
    doomed = next(
        n for n, line in enumerate(lines, 1) if b'"19:31:40", "id": 1,' in line.replace(b"2020-10-19 ", b"")
    )
    when = datetime(2020, 10, 19, 19, 31, 40, tzinfo=UTC)
    assert sequence_gaps(without_lines(data, doomed)) == [(when, when, doomed)]  # shown by the next record
    (gap,) = [g for g in read(without_lines(data, doomed))[1] if g.reason == "sequence"]
    assert "from 0 to 2" in gap.detail and "missing: 1" in gap.detail


@needs_corpus
def test_two_records_deleted_from_a_real_percona_log_are_one_gap_and_an_out_of_order_pair_none() -> None:
    data = FILTER_XML.read_bytes()
    starts = [n for n, line in enumerate(data.splitlines(), 1) if line.strip().startswith(b"<AUDIT_RECORD")]
    # Records 2 and 3 (RECORD_ID "2_..." and "3_...") deleted: each is one run of lines.
    first, after = starts[2], starts[4]
    edited = without_lines(data, *range(first, after))
    (gap,) = [g for g in read(edited)[1] if g.reason == "sequence"]
    assert gap.line == first  # the record after them, at the line the first deleted one had
    assert "2 record(s) missing" in gap.detail and "from 1 to 4" in gap.detail
    # Records 3 and 4 swapped (written out of order by two threads): nothing is missing.
    lines = data.splitlines(keepends=True)
    a, b, c = starts[3] - 1, starts[4] - 1, starts[5] - 1
    swapped = b"".join(lines[:a] + lines[b:c] + lines[a:b] + lines[c:])
    assert sequence_gaps(swapped) == []


@needs_corpus
def test_the_documentation_excerpt_shows_the_records_it_left_out() -> None:
    # MySQL's manual prints six records of one log whose RECORD_IDs are 1, 2, 6, 8, 11, 12.
    details = [g.detail for g in read(DOCS_XML.read_bytes())[1] if g.reason == "sequence"]
    assert [d.split(":")[0] for d in details] == [
        "3 record(s) missing",
        "1 record(s) missing",
        "2 record(s) missing",
    ]
    assert ["from 2 to 6" in details[0], "from 6 to 8" in details[1], "from 8 to 11" in details[2]] == [
        True
    ] * 3


@needs_corpus
def test_a_hole_found_before_a_checkpoint_is_decided_after_it() -> None:
    data = without_lines(ENTERPRISE_JSON.read_bytes(), 22)  # id 2 of 19:31:40: the hole shows at line 22
    whole = [(g.line, g.detail) for g in read(data)[1] if g.reason == "sequence"]
    assert len(whole) == 1
    lines = data.splitlines(keepends=True)
    parser = json_audit.parse
    # Read on until the record after the hole, and cut there as a checkpoint does (the state
    # through JSON); a new reader goes on from that state.
    first = GapFinder()
    before: list[tuple[int, str]] = []
    for item in first.process(classify_events(SessionTracker("db1").process(parser(lines, hints=HINTS)))):
        if isinstance(item, EventRecord) and item.line == 23:
            break
        if isinstance(item, GapRecord) and item.reason == "sequence":
            before.append((item.line, item.detail))
    state = json.loads(json.dumps(first.to_state()))
    assert before == [] and state["counters"]["holes"]  # still waiting for a late record
    second = GapFinder()
    second.load_state(state)
    rest = _shifted(parser(lines[22:], hints=HINTS), lines[:22])
    out = second.process(classify_events(SessionTracker("db1").process(rest)))
    assert [(g.line, g.detail) for g in out if isinstance(g, GapRecord) and g.reason == "sequence"] == whole


def _shifted(items, before):
    """The parser's items of the second part, at the lines and offsets they have in the whole."""
    offset, count = sum(map(len, before)), len(before)
    for item in items:
        item.line += count
        item.offset += offset
        yield item


def test_the_window_lets_late_records_fill_a_hole() -> None:
    assert SEQUENCE_WINDOW >= 16  # two threads' records a few apart are no gap


pytestmark = pytest.mark.django_db(transaction=True)


@needs_corpus
def test_the_store_and_the_gaps_api_show_a_sequence_gap(tmp_path: Path, client, investigator) -> None:
    log = tmp_path / "audit.log"
    log.write_bytes(without_lines(ENTERPRISE_JSON.read_bytes(), 22))
    call_command("ingest", str(log), "--server", "db1", stdout=io.StringIO())
    (row,) = Gap.objects.filter(reason="sequence")
    assert row.line == 22 and "missing" in row.detail
    call_command("ingest", str(log), "--server", "db1", stdout=io.StringIO())  # again: nothing new
    assert Gap.objects.filter(reason="sequence").count() == 1
    client.force_login(investigator)
    page = client.get("/")
    assert b"records missing: the log&#x27;s own counter jumped" in page.content
    assert b"from 1 to 3" in page.content
