"""The replica pull's spool writer (ingest.binlog.spool), fed events made here: what a server (or
something posing as one) sends is hostile input. No server, no Django."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from ingest.binlog import reader as r
from ingest.binlog.reader import HEADER, MAGIC
from ingest.binlog.spool import ARTIFICIAL, HEARTBEATS, PullState, ResetSeen, Spool, SpoolError


def _event(kind: int, body: bytes, *, end: int, flags: int = 0, checksum: bool = True) -> bytes:
    size = 19 + len(body) + (4 if checksum else 0)
    header = HEADER.pack(1_700_000_000, kind, 17, size, end, flags)
    crc = zlib.crc32(header + body).to_bytes(4, "little") if checksum else b""
    return header + body + crc


def _rotate(name: bytes, position: int = 4) -> bytes:
    return _event(r.ROTATE, struct.pack("<Q", position) + name, end=0, flags=ARTIFICIAL)


def _fde(*, end: int | None = None) -> bytes:
    body = struct.pack("<H50sIB", 4, b"10.11.19-MariaDB-log", 0, 19) + bytes(range(40)) + b"\x01"
    size = 19 + len(body) + 4
    return _event(r.FORMAT_DESCRIPTION, body, end=4 + size if end is None else end)


def _query(at: int, text: bytes = b"BEGIN") -> bytes:
    body = struct.pack("<IIBHH", 7, 0, 0, 0, 0) + b"\0" + text
    return _event(r.QUERY, body, end=at + 19 + len(body) + 4)


def test_events_land_at_their_positions_and_made_up_ones_are_dropped(tmp_path: Path) -> None:
    state = PullState()
    spool = Spool(tmp_path, state, checksum=True)
    fde = _fde()
    spool.write(_rotate(b"mariadb-bin.000001"))
    spool.write(fde)
    spool.write(_event(HEARTBEATS[0], b"mariadb-bin.000001", end=0, flags=ARTIFICIAL))
    spool.write(_event(HEARTBEATS[1], b"\x01", end=123))  # MySQL 8's v2: a position, not in any file
    q = _query(4 + len(fde))
    spool.write(q)
    spool.close()
    data = (tmp_path / "g000001" / "mariadb-bin.000001").read_bytes()
    assert data == MAGIC + fde + q
    assert (state.file, state.position) == ("mariadb-bin.000001", len(data))

    # The next pull goes on in the same file; the format description sent again is checked.
    again = Spool(tmp_path, state, checksum=True)
    again.write(_rotate(b"mariadb-bin.000001", state.position))
    again.write(_fde(end=0))
    q2 = _query(len(data), b"COMMIT")
    again.write(q2)
    again.close()
    assert (tmp_path / "g000001" / "mariadb-bin.000001").read_bytes() == data + q2


def test_an_event_out_of_step_is_refused(tmp_path: Path) -> None:
    spool = Spool(tmp_path, PullState(), checksum=True)
    spool.write(_rotate(b"mariadb-bin.000001"))
    fde = _fde()
    spool.write(fde)
    with pytest.raises(SpoolError, match="came where the spool is at"):
        spool.write(_query(4 + len(fde) + 100))
    spool.close()


@pytest.mark.parametrize("name", [b"../escape", b"a/b", b"", b"x" * 300, b".."])
def test_a_file_name_that_leaves_the_spool_is_refused(tmp_path: Path, name: bytes) -> None:
    spool = Spool(tmp_path / "spool", PullState(), checksum=True)
    with pytest.raises(SpoolError, match="refused"):
        spool.write(_rotate(name))
    spool.close()
    assert not (tmp_path / "escape").exists()


def test_another_file_of_the_same_name_is_a_reset(tmp_path: Path) -> None:
    state = PullState()
    spool = Spool(tmp_path, state, checksum=True)
    spool.write(_rotate(b"mariadb-bin.000001"))
    fde = _fde()
    spool.write(fde)
    spool.write(_query(4 + len(fde)))
    spool.close()
    other = bytearray(_fde(end=0))
    other[19 + 2] ^= 0xFF  # another server version: another file
    again = Spool(tmp_path, state, checksum=True)
    again.write(_rotate(b"mariadb-bin.000001", state.position))
    with pytest.raises(ResetSeen):
        again.write(bytes(other))
    again.close()


def test_an_event_whose_size_lies_is_refused(tmp_path: Path) -> None:
    spool = Spool(tmp_path, PullState(), checksum=True)
    spool.write(_rotate(b"mariadb-bin.000001"))
    fde = bytearray(_fde())
    fde[9:13] = struct.pack("<I", 10_000)
    with pytest.raises(SpoolError, match="says it has"):
        spool.write(bytes(fde))
    spool.close()
