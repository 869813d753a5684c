"""Oracle SQLcl exports are read as a stream (issue 23): each parser yields its first rows'
records after reading only those rows, so memory does not grow with the export (an export
without end is read as far as it is asked to)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.parsers import oracle_csv, oracle_json
from ingest.parsers.records import LogRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


class Endless:
    """The lines of an export's head, then its rows again and again, without end; counts what
    the parser took."""

    def __init__(self, head: list[bytes], rows: list[bytes]) -> None:
        self.head, self.rows = head, rows
        self.taken = 0

    def __iter__(self) -> Iterator[bytes]:
        for line in itertools.chain(self.head, itertools.cycle(self.rows)):
            self.taken += 1
            yield line


def _csv() -> Endless:
    lines = (FIXTURES / "oracle-csv" / "unified-scene.csv").read_bytes().splitlines(keepends=True)
    return Endless(lines[:1], lines[1:])


def _json() -> Endless:
    lines = (FIXTURES / "oracle-json" / "unified-scene.json").read_bytes().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith(b"{") and b'"audit_type"' in line)
    rows = [line if line.startswith(b",") else b"," + line for line in lines[first + 1 : -1]]
    return Endless(lines[: first + 1], rows)


@pytest.mark.parametrize(("parser", "export"), [(oracle_csv, _csv), (oracle_json, _json)])
def test_it_yields_the_first_rows_before_reading_on(parser: object, export: object) -> None:
    source = export()  # type: ignore[operator]  # (the functions above)
    records = [item for item in itertools.islice(parser.parse(source), 200) if isinstance(item, LogRecord)]  # type: ignore[attr-defined]  # (the parser modules)
    assert len(records) >= 150  # rows, not problems, however many times the rows went round
    assert source.taken <= len(source.head) + 200 + 2  # what it read: about what it gave
    assert [r.offset for r in records] == sorted(r.offset for r in records)
