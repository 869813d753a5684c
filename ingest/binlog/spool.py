"""A replica's pull of the binary log, written into a spool of binlog files (no Django).

The server is asked for its binlog as a replica asks (COM_BINLOG_DUMP with its own server id,
BINLOG_DUMP_NON_BLOCK: it sends what it has and ends with an EOF packet instead of waiting),
and each event it sends is written, byte for byte, at its own position into a file of the name
the server gives it: the spool holds the server's files as they are (the magic, the format
description, every event with its checksum), so the metadata pass and the row images read it
exactly as they read copied files.

Not mysql-replication's BinLogStreamReader: it decodes every event into objects and keeps no
raw bytes, while the spool needs the bytes and nothing decoded. The packets are read with
PyMySQL's connection (as that library does), one at a time, bounded in bytes and seconds.

The stream, per the servers' replication code: a fake ROTATE (artificial flag, or position 0)
names the file and the position the events start at; then the file's format description (sent
with position 0 when the dump starts after it: the spool has it already); then the events, each
carrying in its header the position it ends at in the server's file. MariaDB sends its own
events (GTID, annotate rows) only to a replica that says it knows them
(`@mariadb_slave_capability`, the BINLOG_SEND_ANNOTATE_ROWS_EVENT flag); heartbeats and other
artificial events are not in the server's files and are not written.
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.binlog import reader as r
from ingest.binlog.reader import HEADER, HEADER_LEN, MAGIC

COM_BINLOG_DUMP = 0x12
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB
MARIADB_SLAVE_CAPABILITY_MINE = 4  # GTID events and the rest of MariaDB's own, as written
ARTIFICIAL = 0x20  # LOG_EVENT_ARTIFICIAL_F: made up for the stream, not in any file
HEARTBEATS = (27, 41)  # HEARTBEAT_LOG_EVENT, and MySQL 8.0.26+'s HEARTBEAT_LOG_EVENT_V2
STATE_FILE = "pull.json"
_SAFE_NAME = 200  # the longest file name taken from the server


class SpoolError(Exception):
    """The stream cannot be written where it says it belongs (out of step, or a name refused)."""


class ResetSeen(SpoolError):
    """The server's file of this name is not the spool's (RESET MASTER, or another server)."""


@dataclass
class PullState:
    """Where the next pull starts: the spool's folder (a new one after RESET MASTER), the
    server's file and the position after the last event written whole, and the last GTID seen."""

    generation: int = 1
    file: str = ""
    position: int = 4
    gtid: str = ""
    notes: list[str] = field(default_factory=list)  # gaps to state on the next file stored

    @classmethod
    def load(cls, spool: Path) -> PullState:
        try:
            data = json.loads((spool / STATE_FILE).read_text())
        except (OSError, ValueError):
            return cls()
        return cls(
            int(data.get("generation", 1)),
            str(data.get("file", "")),
            int(data.get("position", 4)),
            str(data.get("gtid", "")),
            [str(n) for n in data.get("notes", [])],
        )

    def save(self, spool: Path) -> None:
        temporary = spool / (STATE_FILE + ".new")
        temporary.write_text(json.dumps(self.__dict__))
        with temporary.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(temporary, spool / STATE_FILE)

    def folder(self, spool: Path) -> Path:
        return spool / f"g{self.generation:06d}"


@dataclass
class PullResult:
    events: int = 0
    bytes: int = 0
    complete: bool = False  # the server said it had nothing more (not cut by the budget)


def _checked_name(raw: bytes) -> str:
    name = raw.decode("utf-8", "replace")
    if not name or len(name) > _SAFE_NAME or "/" in name or "\0" in name or name in (".", ".."):
        raise SpoolError(f"the server named a binlog file {name[:80]!r}: refused")
    return name


class Spool:
    """Writes the events of one dump at their positions in the spool's files."""

    def __init__(self, spool: Path, state: PullState, checksum: bool) -> None:
        self.spool, self.state, self.checksum = spool, state, checksum
        self.folder = state.folder(spool)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.file: Any = None  # the open spool file
        self.name = ""
        if state.file:
            self._open(state.file, state.position)

    def _open(self, name: str, position: int) -> None:
        """Continue the spool's file `name` at `position` (what lies after it was never saved
        as pulled: a pull cut before its end)."""
        self.close()
        path = self.folder / name
        if position > 4 and (not path.exists() or path.stat().st_size < position):
            raise SpoolError(f"{path} is shorter than the {position} bytes the last pull saved")
        self.file = path.open("r+b" if path.exists() else "w+b")
        self.file.truncate(position if position > 4 else 0)
        self.file.seek(0, os.SEEK_END)
        self.name = name

    def close(self) -> None:
        if self.file is not None:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            self.file = None

    def write(self, event: bytes) -> None:
        """One event as the server sent it (header, body, checksum)."""
        if len(event) < HEADER_LEN:
            raise SpoolError("an event shorter than its header")
        _time, kind, server_id, size, next_position, flags = HEADER.unpack_from(event)
        if size != len(event):
            raise SpoolError(f"an event of {len(event)} bytes says it has {size}")
        if kind == r.ROTATE and (flags & ARTIFICIAL or next_position == 0):
            end = len(event) - (4 if self.checksum else 0)
            (position,) = struct.unpack_from("<Q", event, HEADER_LEN)
            self._rotate(_checked_name(event[HEADER_LEN + 8 : end]), position)
            return
        if kind == r.FORMAT_DESCRIPTION and next_position == 0:
            self._same_file(event)  # the dump started after it: the spool has it
            return
        if flags & ARTIFICIAL or kind in HEARTBEATS or next_position == 0:
            return  # made up for the stream: no place in the server's file
        if self.file is None:
            raise SpoolError("an event before the server named its file")
        at = self.file.tell()
        if kind == r.FORMAT_DESCRIPTION and at == 0:
            self.file.write(MAGIC)
            at = 4
        if next_position - size != at:
            raise SpoolError(
                f"{self.name}: an event for position {next_position - size} came where the spool is at {at}"
            )
        self.file.write(event)
        self.state.file, self.state.position = self.name, at + size
        if kind == r.MARIADB_GTID and len(event) >= HEADER_LEN + 12:
            seq, domain = struct.unpack_from("<QI", event, HEADER_LEN)
            self.state.gtid = f"{domain}-{server_id}-{seq}"

    def _rotate(self, name: str, position: int) -> None:
        if name == self.name and self.file is not None:
            return  # the dump's first rotate names the file being continued
        path = self.folder / name
        if position <= 4 and path.exists() and path.stat().st_size > 4:
            raise ResetSeen(f"the server starts {name} again, which the spool holds already (RESET MASTER?)")
        self._open(name, position if path.exists() else 4)

    def _same_file(self, event: bytes) -> None:
        """The format description the server sends when a dump starts inside a file: the same
        as the spool's own, or the server's file of that name is another (RESET MASTER)."""
        if self.file is None:
            return
        self.file.flush()
        with (self.folder / self.name).open("rb") as f:
            f.seek(4)
            mine = f.read(len(event))
        # Compared without what the server changes in the copy it sends: the flags (in use), the
        # position (0), the creation time (0, so that a replica does not take it for a restart)
        # and so the checksum.
        created = HEADER_LEN + 2 + 50
        if (
            len(mine) < len(event)
            or mine[:13] != event[:13]
            or mine[HEADER_LEN:created] != event[HEADER_LEN:created]
            or mine[created + 4 : -4] != event[created + 4 : -4]
        ):
            raise ResetSeen(f"the server's {self.name} is not the file the spool holds (RESET MASTER?)")


MAX_PACKET = 0xFFFFFF  # a longer event comes in several packets of this size, then a shorter one
READ_CHUNK = 64 * 1024


def read_event_packet(conn: Any, *, max_bytes: int, deadline: float) -> bytes:
    """The next packet of the dump (packets of one event joined), read with PyMySQL's socket
    but bounded here: at most `max_bytes` (an event larger is refused, not held in memory)
    and no read past `deadline` (each read waits at most the time left). An error packet is
    raised as PyMySQL raises it (the server's code and message)."""
    import pymysql  # only a live pull loads PyMySQL

    parts: list[bytes] = []
    total = 0
    while True:
        header = _read(conn, 4, deadline)
        low, high, sequence = struct.unpack("<HBB", header)
        length = packet_length = low + (high << 16)
        if sequence != conn._next_seq_id:
            conn._force_close()
            raise SpoolError(
                f"packet {sequence} came where {conn._next_seq_id} was due: the stream is broken"
            )
        conn._next_seq_id = (sequence + 1) % 256
        total += length
        if total > max_bytes:
            conn._force_close()
            raise SpoolError(
                f"an event of more than {max_bytes} bytes (BINLOG_MAX_EVENT_BYTES): "
                "not pulled; raise the limit"
            )
        while length:
            chunk = _read(conn, min(length, READ_CHUNK), deadline)
            parts.append(chunk)
            length -= len(chunk)
        if packet_length < MAX_PACKET:
            break
    data = b"".join(parts)
    if data[:1] == b"\xff":
        pymysql.err.raise_mysql_exception(data)
    return data


def _read(conn: Any, n: int, deadline: float) -> bytes:
    left = deadline - time.monotonic()
    if left <= 0:
        conn._force_close()
        raise SpoolError("the pull ran out of time inside an event (BINLOG_POLL_SECONDS)")
    conn._sock.settimeout(left)
    return bytes(conn._read_bytes(n))


def pull(
    conn: Any,
    spool: Path,
    *,
    server_id: int,
    max_bytes: int,
    max_seconds: float,
    max_event_bytes: int = 1 << 30,
    first_file: Callable[[], str],
) -> tuple[PullState, PullResult]:
    """One pull into `spool` from where the last one stopped (`pull.json` there); returns the
    new state (saved) and what came. `first_file()` names the server's oldest binlog (for the
    first pull). Raises the driver's errors (refused, no grant) and SpoolError."""
    spool.mkdir(parents=True, exist_ok=True)
    state = PullState.load(spool)
    cur = conn.cursor()
    cur.execute("SELECT @@version")
    version = str(cur.fetchone()[0])
    mariadb = "mariadb" in version.lower()
    checksum = False
    try:
        cur.execute("SELECT @@global.binlog_checksum")
        checksum = str(cur.fetchone()[0]).upper() == "CRC32"
        cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
    except Exception:  # a server before checksums (MySQL 5.5): events come without
        checksum = False
    flags = BINLOG_DUMP_NON_BLOCK
    if mariadb:
        cur.execute("SET @mariadb_slave_capability = %s", (MARIADB_SLAVE_CAPABILITY_MINE,))
        flags |= BINLOG_SEND_ANNOTATE_ROWS_EVENT
    cur.close()
    if not state.file:
        state.file, state.position = first_file(), 4
    writer = Spool(spool, state, checksum)
    result = PullResult()
    deadline = time.monotonic() + max_seconds
    try:
        name = state.file.encode()
        conn._execute_command(COM_BINLOG_DUMP, struct.pack("<IHI", state.position, flags, server_id) + name)
        while True:
            packet = read_event_packet(conn, max_bytes=max_event_bytes + 1, deadline=deadline)
            if packet[:1] == b"\xfe" and len(packet) < 9:
                result.complete = True
                break
            if packet[:1] != b"\x00":
                raise SpoolError(f"an unexpected packet in the binlog stream: {packet[:16].hex()}")
            writer.write(packet[1:])
            result.events += 1
            result.bytes += len(packet) - 1
            if result.bytes >= max_bytes or time.monotonic() > deadline:
                break  # the rest comes with the next pull
    finally:
        writer.close()
        state.save(spool)
    return state, result
