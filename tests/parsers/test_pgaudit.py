"""pgAudit parsers on the real logs of tests/fixtures/pgaudit_scene (csvlog, jsonlog, stderr)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from ingest.parsers import FORMATS, pgaudit_csv, pgaudit_json, pgaudit_stderr
from ingest.parsers.detect import HEAD_BYTES
from ingest.parsers.pgaudit import MAX_WAIT_LINES, parse_time, session_number
from ingest.parsers.records import LogRecord, ParsePoint, Problem
from tests.parsers.pgaudit_truth import LAYOUTS, check_against_truth, parse_file

SCENE = Path(__file__).resolve().parents[1] / "fixtures" / "pgaudit_scene"
TRUTH = json.loads((SCENE / "truth.json").read_text())
SAMPLES = sorted(
    p for p in SCENE.iterdir() if p.suffix in (".csv", ".json", ".log") and p.name != "truth.json"
)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("layout", ["csv", "json", "log"])
def test_it_reads_every_statement_the_scene_drove(layout: str) -> None:
    check_against_truth(SCENE, TRUTH, layout)


def _key(item: object) -> tuple[object, ...]:
    if isinstance(item, LogRecord):
        return (
            item.command,
            item.user,
            item.database,
            item.connection_id,
            item.occurred_at,
            item.argument,
            item.objects,
            item.rows_affected,
            item.extra.get("parameters"),
            item.extra.get("substatements"),
            item.extra.get("error"),
        )
    return (type(item).__name__,)


@pytest.mark.parametrize("part", [1, 2])
def test_the_three_layouts_give_the_same_records(part: int) -> None:
    layouts = [
        parse_file(SCENE / name) for name in (TRUTH["files"][k][part - 1] for k in ("csv", "json", "log"))
    ]
    # Each destination is written apart: lines of two processes in the same instant may come
    # in either order, so the records are compared as sets.
    csv_items, json_items, stderr_items = (sorted(map(_key, items), key=repr) for items in layouts)
    assert csv_items == json_items == stderr_items


def test_a_function_s_writes_are_one_event_naming_both_relations() -> None:
    items = parse_file(SCENE / TRUTH["files"]["csv"][0])
    purge = next(
        i
        for i in items
        if isinstance(i, LogRecord)
        and "shop.archive" in i.objects
        and "substatements" in i.extra
        and i.status == "ok"
    )
    assert purge.objects == ("shop.archive", "shop.orders")
    commands = json.loads(purge.extra["commands"])
    assert [c[2] for c in commands] == ["INSERT", "DELETE"]
    assert purge.raw.count(b"AUDIT: SESSION,") == 2


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_it_resumes_at_every_record(sample: Path) -> None:
    data = sample.read_bytes()
    parse = LAYOUTS[sample.suffix.lstrip(".")].parse
    full = list(parse(data.splitlines(keepends=True)))
    for item in full:
        tail = list(
            parse(
                data[item.offset :].splitlines(keepends=True), start_offset=item.offset, start_line=item.line
            )
        )
        assert tail == [i for i in full if i.offset >= item.offset], (sample.name, item.offset)


def test_records_carry_exact_bytes_and_lines() -> None:
    for sample in SAMPLES:
        data = sample.read_bytes()
        for item in parse_file(sample):
            if isinstance(item, LogRecord) and "parts" not in item.extra:
                assert data[item.offset : item.offset + len(item.raw)] == item.raw
                assert data[: item.offset].count(b"\n") + 1 == item.line


def test_a_statement_interleaved_with_another_session_stays_one_record() -> None:
    lines = (SCENE / TRUTH["files"]["csv"][0]).read_bytes().splitlines(keepends=True)
    sub1 = next(n for n, line in enumerate(lines) if b"AUDIT: SESSION,9,1,WRITE,INSERT" in line)
    other = next(n for n, line in enumerate(lines) if b"connection authorized: user=bob" in line)
    moved = (
        lines[: sub1 + 1]
        + [lines[other]]
        + [line for n, line in enumerate(lines[sub1 + 1 :], sub1 + 1) if n != other]
    )
    items = list(pgaudit_csv.parse(moved))
    purge = next(
        i
        for i in items
        if isinstance(i, LogRecord) and i.extra.get("statement_id") == "9" and i.user == "alice"
    )
    assert purge.objects == ("shop.archive", "shop.orders")
    first, second = (tuple(map(int, p.split(":"))) for p in purge.extra["parts"].split(","))
    data = b"".join(moved)
    assert data[first[0] : first[0] + first[1]] + data[second[0] : second[0] + second[1]] == purge.raw
    assert [i.offset for i in items] == sorted(i.offset for i in items)


def test_a_statement_that_never_ends_does_not_hold_the_records_after_it() -> None:
    lines = (SCENE / TRUTH["files"]["csv"][0]).read_bytes().splitlines(keepends=True)
    audit = next(line for line in lines if b"AUDIT: SESSION,1,1" in line and b'"alice"' in line)
    filler = next(line for line in lines if b"connection received" in line)
    items = pgaudit_csv.parse([audit] + [filler] * (MAX_WAIT_LINES + 5))
    assert isinstance(next(items), LogRecord)


def test_an_unsupported_prefix_is_refused_naming_what_is_missing() -> None:
    class Hints:
        log_line_prefix = "%m [%p] %q%u@%d "

    data = (SCENE / TRUTH["files"]["log"][0]).read_bytes()
    items = list(pgaudit_stderr.parse(data.splitlines(keepends=True), hints=Hints()))
    assert len(items) == 1 and isinstance(items[0], Problem)
    assert "%c (session id)" in items[0].reason
    with pytest.raises(pgaudit_stderr.UnsupportedPrefix, match=r"no %u \(user\)"):
        pgaudit_stderr.compile_prefix("%m %d %c ")


def test_a_debian_default_log_is_claimed_and_refused() -> None:
    line = (
        b"2026-11-25 01:16:17.466 UTC [16661] alice@shop LOG:  AUDIT: SESSION,1,1,WRITE,DELETE,,,x,<none>\n"
    )
    assert pgaudit_stderr.recognise(line)
    (problem,) = pgaudit_stderr.parse([line])
    assert isinstance(problem, Problem) and "%c" in problem.reason


def test_recognisers_claim_their_own_samples_only() -> None:
    ours = {"csv": pgaudit_csv.recognise, "json": pgaudit_json.recognise, "log": pgaudit_stderr.recognise}
    for sample in SAMPLES:
        head = sample.read_bytes()[:HEAD_BYTES]
        assert [k for k, recognise in ours.items() if recognise(head)] == [sample.suffix.lstrip(".")]
        # Registered: its own format claims it, and no other (json-audit does not take a jsonlog).
        own = {".csv": "pgaudit-csv", ".json": "pgaudit-json", ".log": "pgaudit-stderr"}[sample.suffix]
        assert [fmt.NAME for fmt in FORMATS if fmt.recognise(head)] == [own], sample.name
    others = [p for p in FIXTURES.rglob("*") if p.is_file() and p.parent != SCENE and p.suffix != ".py"]
    assert others
    for path in others:
        head = path.read_bytes()[:HEAD_BYTES]
        assert not any(recognise(head) for recognise in ours.values()), path


def test_times_and_sessions() -> None:
    assert parse_time("2026-11-25 01:16:17.404 UTC")[0].isoformat() == "2026-11-25T01:16:17.404000+00:00"  # type: ignore[union-attr]  # a time
    assert parse_time("2026-11-25 01:16:17 +0530")[0].utcoffset().total_seconds() == 19800  # type: ignore[union-attr]  # a time
    when, zone = parse_time("2026-11-25 01:16:17.404 CET")
    assert when is not None and when.tzinfo is None and zone == "CET"
    assert parse_time("2026-13-45 99:00:00 UTC") == (None, None)
    assert session_number("6b0636e1.4115") == 0x6B0636E1 << 24 | 0x4115
    assert session_number("zz.1") is None and session_number("1.ffffffff") is None


def interleaved(suffix: str) -> bytes:
    """The scene's first file with bob's login moved between the two pgAudit entries of alice's
    `SELECT shop.purge_old(9)`: another session's record inside a statement, as a busy server
    writes them."""
    path = next(p for p in SAMPLES if p.suffix == suffix and p.stem.endswith("-1"))
    lines = path.read_bytes().splitlines(keepends=True)
    login = next(i for i, line in enumerate(lines) if b"connection authorized: user=bob" in line)
    second = next(
        i
        for i, line in enumerate(lines)
        if b"shop.orders,DELETE FROM shop.orders WHERE total < below" in line
    )
    assert second < login
    moved = lines.pop(login)
    lines.insert(second, moved)
    return b"".join(lines)


@pytest.mark.parametrize("suffix", [".csv", ".json", ".log"])
def test_a_read_resumed_at_any_line_gives_every_record_once_whole(suffix: str) -> None:
    """Read up to any line end, stop, resume where the parser says: the records of both reads
    are those of one read (a record read twice is read whole both times: the store keeps it once)."""
    module = {".csv": pgaudit_csv, ".json": pgaudit_json, ".log": pgaudit_stderr}[suffix]
    data = interleaved(suffix)
    whole = [i for i in module.parse(io.BytesIO(data))]
    assert any(isinstance(i, LogRecord) and "parts" in i.extra for i in whole)  # interleaved indeed
    key = {(i.offset, i.raw): n for n, i in enumerate(whole)}
    ends = [n + 1 for n, b in enumerate(data) if b == 0x0A]
    # Where a reader stops: at the end of what was written so far, or between two items (a cut).
    stops: list[tuple[list[Any], ParsePoint]] = []
    for end in ends:
        parser = module.resumable()
        first = list(parser.feed(data[:end].splitlines(keepends=True)))
        stops.append((first, parser.resume_point()))
    parser = module.resumable()
    so_far: list[Any] = []
    for item in parser.feed(data.splitlines(keepends=True)):
        so_far.append(item)
        stops.append(([*so_far], parser.resume_point()))  # (the caller holds the item)
    for first, point in stops:
        end = point.offset
        assert (
            data[point.offset - 1 : point.offset] in (b"", b"\n")
            and point.line == data[: point.offset].count(b"\n") + 1
        )
        rest = list(
            module.parse(io.BytesIO(data[point.offset :]), start_offset=point.offset, start_line=point.line)
        )
        got = [*first, *(i for i in rest if not any(i == j for j in first))]
        assert [key.get((i.offset, i.raw)) for i in got] == list(range(len(whole))), end
        assert got == whole, end
