"""Monthly partitions of the event table (ingest_event_row), created before events for them arrive."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime

from django.db import connection, transaction
from psycopg import sql

# One advisory lock key for partition DDL, so two workers never race to create one.
PARTITION_LOCK_KEY = 0x41575F50  # "AW_P"

_known: set[date] = set()


def month_of(when: datetime) -> date:
    when = when.astimezone(UTC)
    return date(when.year, when.month, 1)


def _next_month(month: date) -> date:
    return date(month.year + (month.month == 12), month.month % 12 + 1, 1)


def partition_name(month: date) -> str:
    return f"ingest_event_y{month.year:04d}m{month.month:02d}"  # (the names of before issue 22)


def ensure_event_partitions(months: Iterable[date]) -> list[str]:
    """Create the monthly partitions that do not exist yet; return the names created.

    Runs in the caller's transaction when there is one (partition DDL is
    transactional in PostgreSQL), under an advisory lock held to its end.
    """
    wanted = sorted(set(months) - _known)
    if not wanted:
        return []
    created: list[str] = []
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", [PARTITION_LOCK_KEY])
        cur.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'ingest_event_row'::regclass"
        )
        existing = {row[0] for row in cur.fetchall()}
        for month in wanted:
            name = partition_name(month)
            if name not in existing:
                # Names and bounds come from integers and dates, never from log text; still, the
                # name goes in as a quoted identifier and the bounds as parameters.
                create = sql.SQL("CREATE TABLE {} PARTITION OF ingest_event_row FOR VALUES FROM (%s) TO (%s)")
                cur.execute(
                    create.format(sql.Identifier(name)).as_string(connection.connection),
                    [datetime(month.year, month.month, 1, tzinfo=UTC),
                     datetime.combine(_next_month(month), datetime.min.time(), UTC)],
                )  # fmt: skip
                created.append(name)
    # Remember them only once they are committed: a rolled-back batch takes them along.
    transaction.on_commit(lambda: _known.update(wanted))
    return created


def forget_known_partitions() -> None:
    """Drop the in-process cache (tests that recreate the database call this)."""
    _known.clear()


def create_partitions_ahead(months_ahead: int, today: date | None = None) -> list[str]:
    month = month_of(datetime.now(UTC)) if today is None else date(today.year, today.month, 1)
    months = [month]
    for _ in range(months_ahead):
        months.append(_next_month(months[-1]))
    return ensure_event_partitions(months)
