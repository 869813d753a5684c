"""Bounds on what a page asks PostgreSQL: a statement timeout, and counts that stop early."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import OperationalError, connection, transaction
from django.db.models import QuerySet
from psycopg.errors import QueryCanceled

from ingest.models import Event


class TooSlow(Exception):
    """PostgreSQL cancelled a query that ran past its time limit (`time_limit`)."""


@contextmanager
def time_limit(milliseconds: int) -> Iterator[None]:
    """Run the block's queries in a transaction whose statements PostgreSQL stops after `milliseconds`.

    Counting and charting a filter over the whole store could take seconds; a page would
    rather say so (and ask for a narrower time range) than keep the investigator waiting.
    """
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(milliseconds)])
            yield
    except OperationalError as e:
        if isinstance(e.__cause__, QueryCanceled):
            raise TooSlow(str(e)) from e
        raise


def count_upto(queryset: QuerySet[Event], limit: int) -> tuple[int, bool]:
    """How many events match, counting no further than `limit`: (count, whether there are more).

    `SELECT count(*) FROM (... LIMIT limit + 1)` stops reading once it knows "more than limit".
    """
    found = queryset.order_by().values("pk")[: limit + 1].count()
    return min(found, limit), found > limit
