"""The metadata pass reads events from its read buffer: it must say what the plain pass says.

`metadata.scan` frames events in its own loop and handles the frequent kinds by offsets into
the buffer (issue 21, speed). `reference_pass.reference_scan` is the pass as it was before:
one `Event` per event from `reader.read_events`, one if-chain. Both must give the same items
(transactions, statements, table changes, row counts, positions, problems at the same byte),
item by item, on every binlog the tests have (MariaDB scenes, MySQL samples, the benchmark's
105 MB file when bench/binlog_bench.py has made it), resumed at a transaction boundary, and
on hostile bytes: files cut anywhere, and bytes changed inside the frequent events with
their checksum made right again, so that the fast handlers meet them and not the CRC check.
"""

from __future__ import annotations

import io
import itertools
import random
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.binlog import metadata, reader
from ingest.binlog.metadata import Transaction, scan
from ingest.binlog.reader import Event, read_events
from tests.binlog.reference_pass import reference_scan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = FIXTURES.parents[1]
MARIADB = sorted((FIXTURES / "binlog_scene").glob("mariadb-*-mariadb-bin.*")) + sorted(
    (FIXTURES / "attribution_scene").glob("mariadb-*-mariadb-bin.*")
)
MYSQL = sorted(p for p in (FIXTURES / "binlog_mysql").iterdir() if p.suffix not in (".sql", ".md"))
BENCH = sorted((REPO / "bench" / "out" / "binlog").glob("mariadb-bin.0*"))
# The frequent kinds, read from the buffer.
FAST_KINDS = {*reader.ROWS_CHANGE, reader.TABLE_MAP, reader.XID, reader.MARIADB_GTID}
FAST_KINDS.add(reader.MARIADB_ANNOTATE_ROWS)


def _same(got: Iterable[Any], expected: Iterable[Any], what: str) -> int:
    """Item by item (the benchmark's file has 50,000 transactions: no lists of them)."""
    n = 0
    for n, (a, b) in enumerate(itertools.zip_longest(got, expected), 1):
        assert repr(a) == repr(b), f"{what}: item {n} differs"
    return n


def _both(data: bytes, name: str, start: int = 0) -> tuple[Iterator[Any], Iterator[Any]]:
    return scan(io.BytesIO(data), name, start=start), reference_scan(io.BytesIO(data), name, start=start)


@pytest.fixture(params=[True, False], ids=["fast", "if-chain-only"])
def fast(request: Any, monkeypatch: Any) -> bool:
    monkeypatch.setattr(metadata, "FAST", request.param)
    return bool(request.param)


@pytest.mark.parametrize("path", MARIADB + MYSQL, ids=lambda p: p.name)
def test_the_pass_says_what_the_plain_pass_says(path: Path, fast: bool) -> None:
    data = path.read_bytes()
    got, expected = _both(data, path.name)
    items = _same(got, expected, path.name)
    assert items >= 2  # at least the file and a transaction


@pytest.mark.skipif(not BENCH, reason="no bench/out/binlog: run bench/binlog_bench.py to make it")
def test_the_pass_says_what_the_plain_pass_says_on_the_benchmark_binlog() -> None:
    for path in BENCH:
        with path.open("rb") as a, path.open("rb") as b:
            items = _same(scan(a, path.name), reference_scan(b, path.name), path.name)
        assert items > 50_000


@pytest.mark.parametrize("path", MARIADB[:2] + MYSQL, ids=lambda p: p.name)
def test_resumed_at_a_transaction_the_pass_says_what_the_plain_pass_says(path: Path) -> None:
    data = path.read_bytes()
    boundaries = [x.end for x in reference_scan(io.BytesIO(data), path.name) if isinstance(x, Transaction)]
    assert boundaries
    for start in boundaries[:: max(1, len(boundaries) // 5)]:
        got, expected = _both(data, path.name, start)
        _same(got, expected, f"{path.name} from {start}")


def _events(data: bytes) -> list[Event]:
    return [e for e in read_events(io.BytesIO(data)) if isinstance(e, Event)]


@pytest.mark.parametrize("path", MARIADB[:1] + MYSQL[:3], ids=lambda p: p.name)
def test_a_file_cut_anywhere_is_the_same_problem_at_the_same_byte(path: Path) -> None:
    data = path.read_bytes()
    cuts = {e.position + k for e in _events(data)[:60] for k in (0, 1, 18, 19, 25)}
    cuts |= set(random.Random(21).sample(range(4, len(data)), 40))
    for cut in sorted(cuts):
        got, expected = _both(data[:cut], path.name)
        _same(got, expected, f"{path.name} cut at {cut}")


def _with_checksum(data: bytearray, event: Event) -> None:
    """Make the CRC32 at the end of `event` right for the bytes it now holds."""
    end = event.position + event.size - reader.CHECKSUM_LEN
    data[end : end + 4] = zlib.crc32(data[event.position : end]).to_bytes(4, "little")


def _has_fast_kinds(path: Path) -> bool:
    return any(e.type in FAST_KINDS for e in _events(path.read_bytes()))


@pytest.mark.parametrize("path", [p for p in MARIADB[:2] + MYSQL if _has_fast_kinds(p)], ids=lambda p: p.name)
def test_hostile_bytes_behind_a_right_checksum_are_the_same_problems(path: Path) -> None:
    data = path.read_bytes()
    head = reader.read_head(io.BytesIO(data))
    assert isinstance(head, tuple)
    checksum = head[0].checksum
    targets = [e for e in _events(data) if e.type in FAST_KINDS and e.position > 4][:40]
    # The file up to a few events past the last target: each change is a scan of it.
    later = [e for e in _events(data) if e.position > targets[-1].position][:3]
    data = data[: (later[-1].position + later[-1].size) if later else len(data)]
    rng = random.Random(path.name)
    tried = 0
    for event in targets:
        body_at = event.position + reader.HEADER_LEN
        body_len = len(event.body)
        # The bytes the handlers read: ids, flags, lengths, column counts, bitmaps, the end.
        spots = {0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14} | {rng.randrange(body_len) for _ in range(4)}
        for spot in sorted(s for s in spots if s < body_len):
            for value in (0xFF, rng.randrange(256)):
                changed = bytearray(data)
                changed[body_at + spot] = value
                if checksum:
                    _with_checksum(changed, event)
                got, expected = _both(bytes(changed), path.name)
                _same(got, expected, f"{path.name}: byte {spot} of the event at {event.position} = {value}")
                tried += 1
        # An event cut short by its own header (its size made smaller, the rest left as is).
        if body_len > 8:
            changed = bytearray(data)
            size = event.size - 5
            changed[event.position + 9 : event.position + 13] = size.to_bytes(4, "little")
            got, expected = _both(bytes(changed), path.name)
            _same(got, expected, f"{path.name}: the event at {event.position} made {size} bytes")
    assert tried > 50


class _ReadOnce(io.BytesIO):
    """A stream read once from its start, as ingest reads a file it hashes on the way."""

    def seek(self, position: int, whence: int = 0) -> int:
        if (position, whence) != (0, 0) or self.tell():
            raise ValueError("read once from its start")
        return super().seek(0)


@pytest.mark.parametrize("path", MARIADB[:1] + MYSQL[:2], ids=lambda p: p.name)
def test_a_file_cut_or_corrupt_is_read_once_in_order_never_seeking_back(path: Path) -> None:
    data = path.read_bytes()
    events = _events(data)
    middle = events[len(events) // 2]
    corrupt = bytearray(data)
    corrupt[middle.position + reader.HEADER_LEN] ^= 0xFF  # its checksum (or its body) now wrong
    for variant in (data, data[: middle.position + 7], bytes(corrupt)):
        got = list(scan(_ReadOnce(variant), path.name))
        _same(got, reference_scan(io.BytesIO(variant), path.name), path.name)
