"""The local MariaDB as the live tests share it: root over its socket, and the lock that every
test or script changing the server's global state (general_log, server_audit...) holds."""

from __future__ import annotations

import fcntl
import os
import time
from typing import Any

import pymysql
import pytest

LOCK = "/tmp/auditweb-mariadb.lock"
SOCKET = "/run/mysqld/mysqld.sock"


def root() -> Any:
    return pymysql.connect(unix_socket=SOCKET, user="root", autocommit=True, connect_timeout=3)


def root_or_skip() -> Any:
    """Root's connection, or the test skipped, saying why, where no server answers."""
    try:
        return root()
    except Exception as e:  # any failure to connect means "no server here"
        pytest.skip(f"MariaDB is not reachable on {SOCKET}: {e}")


def hold_lock(seconds: float = 600) -> int:
    """Wait for the lock (the test is skipped after `seconds`); closing the descriptor frees it."""
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                pytest.skip(f"{LOCK} stayed held for {seconds:.0f} s (another run uses the server)")
            time.sleep(1)
