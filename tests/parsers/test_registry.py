"""The format registry: every format registers in its module and the one tuple, and nowhere else."""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import pytest

from ingest.binlog.metadata import BinlogFile, Transaction
from ingest.parsers import (
    AUTO,
    FORMATS,
    NAMES,
    binary_reader,
    by_name,
    format_choices,
    open_parser,
    reads_bytes,
    waits_for_next_line,
)
from ingest.parsers.detect import HEAD_BYTES, detect_format
from ingest.parsers.records import Hints, LogRecord, Problem, ServerStart

from ..conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]
# Our own samples, written by the real server here (tests/fixtures/*/regenerate.py); a format's
# folder tests/fixtures/<NAME>/ is looked in too.
OWN_SAMPLES = {
    "binlog": ["binlog_scene/*-mariadb-bin.*"],
    "general-log": ["genlog/*.log", "crime_scene/*-general.log", "attribution_scene/*-general.log*"],
    "mariadb-audit": ["server_audit/*.log", "server_audit_syslog/*.log", "crime_scene/*-server_audit.log"],
    "general-log-csv": ["general_log_table/*.CSV", "crime_scene/*.CSV"],
    "general-log-tsv": ["general_log_table/*.tsv", "crime_scene/*.tsv"],
    "pgaudit-csv": ["pgaudit_scene/*.csv"],
    "pgaudit-json": ["pgaudit_scene/*.json"],
    "pgaudit-stderr": ["pgaudit_scene/*.log"],
}
# Where the source tree may name formats: the parsers themselves, and what only describes or tests
# them (docs, tests, benchmarks' sample inputs, and migrations, which are history).
NOT_SCANNED = (
    "ingest/parsers/",
    "tests/",
    "docs/",
    "bench/",
    "ingest/migrations/",
    "investigations/migrations/",
)


def samples(name: str) -> list[Path]:
    patterns = [*OWN_SAMPLES.get(name, []), f"{name}/*"]
    found = {
        p
        for pattern in patterns
        for p in FIXTURES.glob(pattern)
        if p.is_file() and p.suffix != ".py" and p.name != "truth.json"
    }
    return sorted(found)


def test_every_format_exports_its_name_label_recogniser_parser_and_precision() -> None:
    for fmt in FORMATS:
        assert isinstance(fmt.NAME, str) and re.fullmatch(r"[a-z][a-z0-9-]*", fmt.NAME), fmt
        assert len(fmt.NAME) <= 20, f"{fmt.NAME}: Source.format holds 20 characters"
        assert isinstance(fmt.LABEL, str) and fmt.LABEL, fmt.NAME
        for export in ("recognise", "time_digits"):
            assert callable(getattr(fmt, export, None)), f"{fmt.NAME} exports no {export}()"
        # A line format parses lines; a binary format (no lines) reads a stream: one or the other.
        assert callable(getattr(fmt, "parse", None)) != reads_bytes(fmt), fmt.NAME


def test_names_are_unique_and_each_finds_its_format() -> None:
    assert len(set(NAMES)) == len(NAMES) == len(FORMATS)
    assert AUTO not in NAMES
    for fmt in FORMATS:
        assert by_name(fmt.NAME) is fmt
    with pytest.raises(
        ValueError, match=r"Format 'nope' is not supported yet \(supported: binlog, pgaudit-json, "
    ):
        by_name("nope")


def test_the_choices_are_auto_and_every_format_in_order() -> None:
    assert [value for value, _ in format_choices()] == [AUTO, *NAMES]


@pytest.mark.parametrize("name", NAMES)
def test_each_format_recognises_its_own_samples(name: str) -> None:
    paths = samples(name)
    if not paths:
        pytest.skip(
            f"no sample of {name} under tests/fixtures/ yet (tests/parsers/test_detect.py reads ../shared)"
        )
    fmt = by_name(name)
    for path in paths:
        data = path.read_bytes()
        assert detect_format(data[:HEAD_BYTES]) == name, path.name
        read = binary_reader(fmt)
        if read is not None:
            got = list(read(io.BytesIO(data), path.name))
            assert isinstance(got[0], BinlogFile), path.name
            assert all(isinstance(i, Transaction) for i in got[1:]), path.name  # no problem in our own
            assert fmt.time_digits(data[:HEAD_BYTES]) == 0  # binlog times are whole seconds
            continue
        items = list(fmt.parse(io.BytesIO(data), hints=Hints(mtime_year=2026)))
        assert all(isinstance(i, LogRecord | ServerStart | Problem) for i in items), path.name
        first = next(i for i in items if isinstance(i, LogRecord))
        assert data[first.offset : first.offset + len(first.raw)] == first.raw, path.name  # its own bytes
        digits = fmt.time_digits(first.raw)
        assert digits is None or 0 <= digits <= 6, path.name


@pytest.mark.parametrize("name", NAMES)
def test_a_parser_opened_at_a_resume_point_gives_what_parse_gives(name: str) -> None:
    """The tail read's parser (resumable or not) yields what `parse` yields, fed the same lines."""
    fmt = by_name(name)
    if reads_bytes(fmt):  # no lines, so no line parser to open: its files are read whole
        with pytest.raises(ValueError, match="have no lines"):
            open_parser(fmt)
        return
    for path in samples(name)[:2]:
        lines = path.read_bytes().splitlines(keepends=True)
        hints = Hints(mtime_year=2026)
        parser = open_parser(fmt, start_offset=0, start_line=1, hints=hints)
        fed = [*parser.feed(lines), *parser.finish()]
        assert fed == list(fmt.parse(lines, hints=hints)), path.name
        point = parser.resume_point()
        assert (point is not None) == waits_for_next_line(fmt)
        if point is not None:  # at the end, once finished: after the last byte
            assert (point.offset, point.line) == (sum(map(len, lines)), len(lines) + 1)


def _named_formats(tree: ast.AST) -> tuple[set[str], list[int]]:
    """The format names a module holds as string constants, and the lines comparing with one."""
    names = set(NAMES)
    found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names}
    compared = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value in names for c in [n.left, *n.comparators])
    ]
    return found, compared


def test_no_module_outside_the_parsers_lists_or_branches_on_format_names() -> None:
    """Adding a format touches its module and the tuple: any other list of formats, or branch on
    one, reads the registry instead. One name as a value (an example, a demo's source) is no list."""
    offenders = []
    for path in sorted(REPO.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith((".", "node_modules/", *NOT_SCANNED)) or "/." in relative:
            continue
        found, compared = _named_formats(ast.parse(path.read_bytes(), relative))
        if len(found) > 1 or compared:
            offenders.append(f"{relative}: {sorted(found)} compared on lines {compared}")
    quoted = re.compile("|".join(rf"[\"']{re.escape(n)}[\"']" for n in NAMES))
    for path in sorted((REPO / "templates").rglob("*.html")):
        if len(set(quoted.findall(path.read_text()))) > 1:
            offenders.append(path.relative_to(REPO).as_posix())
    assert offenders == []


def test_the_scan_would_see_a_list_of_formats() -> None:
    found, compared = _named_formats(
        ast.parse('KNOWN = ("general-log", "mariadb-audit")\nif f == "json-audit": ...')
    )
    assert found == {"general-log", "mariadb-audit", "json-audit"} and compared == [2]
