"""A table under all its names: the renames (RENAME TABLE, ALTER TABLE ... RENAME) followed either way."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from ingest.models import Event
from ingest.sql.renames import rename_pairs

RENAME_TYPES = ("RENAME TABLE", "ALTER TABLE")
MAX_RENAMES = 100  # a bound on following names, against a log that renames in circles


def rename_events() -> QuerySet[Event]:
    """Events that may have renamed tables (rename_pairs says which became which)."""
    return Event.objects.filter(destructive=True, statement_type__in=RENAME_TYPES)


def renamed_to(names: list[str]) -> list[tuple[str, datetime]]:
    """Every later name of these tables, with the time from which it is theirs, in order."""
    found: list[tuple[str, datetime]] = []
    todo: list[tuple[str, datetime | None]] = [(n, None) for n in dict.fromkeys(names)]
    seen = set(names)
    while todo and len(found) < MAX_RENAMES:
        name, since = todo.pop(0)
        renames = rename_events().filter(tables__contains=[name], occurred_at__isnull=False)
        if since is not None:
            renames = renames.filter(occurred_at__gte=since)
        rows = renames.order_by("occurred_at", "id").values_list("occurred_at", "sql", "database")
        for when, sql, database in rows:
            for old, new in rename_pairs(sql, database):
                if old == name and new not in seen:
                    seen.add(new)
                    found.append((new, when))
                    todo.append((new, when))
    return found


def renamed_from(name: str) -> list[tuple[str, datetime]]:
    """The names this table had before (one step back), with the time it took this name."""
    found = []
    rows = rename_events().filter(tables__contains=[name], occurred_at__isnull=False)
    rows = rows.order_by("occurred_at", "id")
    for when, sql, database in rows.values_list("occurred_at", "sql", "database"):
        found += [(old, when) for old, new in rename_pairs(sql, database) if new == name]
    return found
