"""A general log written the way MySQL 5.7+ writes it (ISO times), for tests and benchmarks of
sources that are followed while they grow and rotate."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

BANNER = (
    b"/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
    b"Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock\n"
    b"Time                 Id Command    Argument\n"
)


class GeneralLogWriter:
    """Appends records to `path` (opened in append mode, like the server): connections that log
    in, run statements (some over several lines, some destructive) and quit."""

    def __init__(self, path: Path, *, start: datetime | None = None, banner: bool = True) -> None:
        self.path = path
        self.time = start or datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
        self.n = 0
        self.open_ids: list[int] = []
        self.next_id = 100
        self.f = path.open("ab")
        if banner:
            self.f.write(BANNER)
            self.f.flush()

    def _stamp(self) -> bytes:
        self.time += timedelta(microseconds=997)
        return self.time.strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()

    def record(self) -> bytes:
        """The next record's bytes (one or more lines)."""
        self.n += 1
        n = self.n
        if not self.open_ids or (n % 50 == 0 and len(self.open_ids) < 8):
            cid = self.next_id
            self.next_id += 1
            self.open_ids.append(cid)
            return b"%s\t%5d Connect\tapp%d@10.0.0.%d on shop using TCP/IP\n" % (
                self._stamp(),
                cid,
                cid % 5,
                cid % 200,
            )
        cid = self.open_ids[n % len(self.open_ids)]
        if n % 97 == 0:
            self.open_ids.remove(cid)
            return b"%s\t%5d Quit\t\n" % (self._stamp(), cid)
        if n % 13 == 0:
            return b"%s\t%5d Query\tSELECT id, total\nFROM orders\nWHERE id = %d\n" % (self._stamp(), cid, n)
        if n % 31 == 0:
            return b"%s\t%5d Query\tDELETE FROM orders WHERE id = %d\n" % (self._stamp(), cid, n)
        return b"%s\t%5d Query\tUPDATE stock SET qty = qty - 1 WHERE item = %d\n" % (self._stamp(), cid, n)

    def write(self, count: int) -> None:
        self.f.write(b"".join(self.record() for _ in range(count)))
        self.f.flush()

    def reopen(self, banner: bool = False) -> None:
        """What the server does on FLUSH GENERAL LOGS: close the file and open `path` again."""
        self.f.close()
        self.f = self.path.open("ab")
        if banner:
            self.f.write(BANNER)
            self.f.flush()

    def close(self) -> None:
        self.f.close()


def rotate_rename(path: Path) -> Path:
    """logrotate's default: general.log -> general.log.1 (older ones shifted), a new empty file."""
    rotated = sorted(path.parent.glob(path.name + ".*"), key=lambda p: -int(p.suffix[1:]))
    for old in rotated:
        old.rename(path.with_name(f"{path.name}.{int(old.suffix[1:]) + 1}"))
    target = path.with_name(path.name + ".1")
    path.rename(target)
    path.touch()
    return target


def rotate_copytruncate(path: Path) -> Path:
    """logrotate's copytruncate: copy general.log to general.log.1, then truncate it in place."""
    rotated = sorted(path.parent.glob(path.name + ".*"), key=lambda p: -int(p.suffix[1:]))
    for old in rotated:
        old.rename(path.with_name(f"{path.name}.{int(old.suffix[1:]) + 1}"))
    target = path.with_name(path.name + ".1")
    target.write_bytes(path.read_bytes())
    os.truncate(path, 0)
    return target


MARIADB_BANNER = (
    b"/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:\n"
    b"Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\n"
    b"Time\t\t    Id Command\tArgument\n"
)


class MariaDbLogWriter:
    """Writes a general log as MariaDB's MYSQL_QUERY_LOG::write does (sql/log.cc): the local time
    "YYMMDD H:MM:SS" only when the second changed since the record before (else two tabs, and the
    server keeps that second across reopening its log), "%6llu " the connection id, the command, a
    tab, the text, a newline; each record in one write, at the current end (O_APPEND). The banner
    is written whenever the file is (re)opened."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last_second: int | None = None
        self.f = path.open("ab", buffering=0)
        self.f.write(MARIADB_BANNER)

    def record(self, connection_id: int, command: str, text: str) -> None:
        now = datetime.now()
        second = int(now.timestamp())
        stamp = b"\t\t" if second == self.last_second else now.strftime("%y%m%d %H:%M:%S\t").encode()
        self.last_second = second
        line = b"%s%6d %s\t%s\n" % (stamp, connection_id, command.encode(), text.encode())
        self.f.write(line)

    def reopen(self) -> None:
        """FLUSH GENERAL LOGS: close, open the path again (a new file after a rename), banner."""
        self.f.close()
        self.f = self.path.open("ab", buffering=0)
        self.f.write(MARIADB_BANNER)

    def close(self) -> None:
        self.f.close()
