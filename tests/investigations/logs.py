"""General-log lines (the MySQL 5.7+ layout, ISO times in UTC) for the page tests."""

from __future__ import annotations

from datetime import datetime

from tests.conftest import FIXTURES

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"


def genlog(*records: tuple[datetime, int, str, str]) -> bytes:
    """One line per (time, connection id, command, argument)."""
    return b"".join(
        b"%s\t%5d %s\t%s\n"
        % (when.strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode(), conn, command.encode(), argument.encode())
        for when, conn, command, argument in records
    )
