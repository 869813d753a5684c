"""The digest: a filter's statements grouped by fingerprint, as pt-query-digest users expect.

Everything is aggregated in PostgreSQL (GROUP BY over the filtered events, then the top
accounts, servers and tables of the shown fingerprints only); the caller runs it under a
statement timeout (`query.limits.time_limit`, DIGEST_MS), so a filter over a huge store answers "too slow"
rather than keeping anyone waiting. Rows are limited (`limit`), sorted as asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import CharField, Count, F, Func, Max, Min, Q, QuerySet, Sum, Window
from django.db.models.functions import RowNumber
from django.http import QueryDict

from ingest.models import Event
from investigations.query.filters import query_id

# sort name -> ORDER BY of the grouped rows (ties by fingerprint, so pages are stable)
SORTS = {
    "count": (F("n").desc(), "fingerprint"),
    "first": (F("first").asc(nulls_last=True), "fingerprint"),
    "last": (F("last").desc(nulls_last=True), "fingerprint"),
    "destructive": (F("destroyed").desc(), F("n").desc(), "fingerprint"),
}
DEFAULT_SORT = "count"
TOP = 3  # accounts, servers and tables named per fingerprint; the rest are counted
SAMPLE_CHARS = 2_000  # a sample statement is cut here (the event's page has all of it)
DIGEST_MS = 10_000  # PostgreSQL stops the digest's queries after this long (page and API alike)


@dataclass(frozen=True)
class Top:
    """The most frequent values (value, statements) and how many distinct values there are."""

    values: list[tuple[str | None, int]]
    distinct: int

    @property
    def more(self) -> int:
        return self.distinct - len(self.values)


@dataclass(frozen=True)
class Row:
    fingerprint: str
    count: int
    destructive: int
    first: datetime | None
    last: datetime | None
    accounts: Top
    servers: Top
    tables: Top
    sample_id: int
    sample_sql: str
    sample_truncated: bool
    share: float  # of the filter's statements

    @property
    def query_id(self) -> str:
        return query_id(self.fingerprint)

    @property
    def destructive_share(self) -> float:
        return self.destructive / self.count if self.count else 0.0


@dataclass(frozen=True)
class Digest:
    rows: list[Row]
    statements: int  # events of the filter that have a statement (a fingerprint)
    fingerprints: int  # distinct fingerprints among them
    without_statement: int  # events of the filter without one: Connect, Quit, Init DB...
    sort: str

    @property
    def more(self) -> int:
        return self.fingerprints - len(self.rows)


def digest(events: QuerySet[Event], *, sort: str = DEFAULT_SORT, limit: int = 100) -> Digest:
    """The filtered `events` by fingerprint: the `limit` first rows in `sort` order.

    1. Totals: statements, distinct fingerprints, events without a statement (one grouped scan).
    2. One row per fingerprint (count, destructive, first, last, newest event), sorted and limited.
    3. For the shown fingerprints only: the TOP accounts, servers and tables (a window function).
    4. The newest event's SQL of each as its sample (stored masked; cut at SAMPLE_CHARS).
    """
    events = events.order_by()
    statements = events.exclude(fingerprint="")
    # Over the groups (a subquery): one hashed pass, where count(DISTINCT) would sort every row.
    totals = (
        events.values("fingerprint")
        .annotate(n=Count("id"))
        .aggregate(
            statements=Sum("n", filter=~Q(fingerprint="")),
            without=Sum("n", filter=Q(fingerprint="")),
            fingerprints=Count("fingerprint", filter=~Q(fingerprint="")),
        )
    )
    grouped = (
        statements.values("fingerprint")
        .annotate(
            n=Count("id"),
            destroyed=Count("id", filter=Q(destructive=True)),
            first=Min("occurred_at"),
            last=Max("occurred_at"),
            sample=Max("id"),
        )
        .order_by(*SORTS.get(sort, SORTS[DEFAULT_SORT]))[:limit]
    )
    groups = list(grouped)
    shown = [g["fingerprint"] for g in groups]
    tops = _tops(statements.filter(fingerprint__in=shown)) if shown else {}
    samples = dict(
        Event.objects.filter(id__in=[g["sample"] for g in groups])
        .annotate(head=Func(F("sql"), 1, SAMPLE_CHARS + 1, function="substr", output_field=CharField()))
        .values_list("id", "head")
    )
    total = totals["statements"] or 0
    rows = []
    for g in groups:
        fp = g["fingerprint"]
        sql = samples.get(g["sample"], "")
        rows.append(
            Row(
                fingerprint=fp,
                count=g["n"],
                destructive=g["destroyed"],
                first=g["first"],
                last=g["last"],
                accounts=tops.get(("user", fp), Top([], 0)),
                servers=tops.get(("server", fp), Top([], 0)),
                tables=tops.get(("table", fp), Top([], 0)),
                sample_id=g["sample"],
                sample_sql=sql[:SAMPLE_CHARS],
                sample_truncated=len(sql) > SAMPLE_CHARS,
                share=g["n"] / total if total else 0.0,
            )
        )
    return Digest(
        rows=rows,
        statements=total,
        fingerprints=totals["fingerprints"] or 0,
        without_statement=totals["without"] or 0,
        sort=sort if sort in SORTS else DEFAULT_SORT,
    )


def _tops(statements: QuerySet[Event]) -> dict[tuple[str, str], Top]:
    """(kind, fingerprint) -> Top, for kind user, server and table (a statement's tables each)."""
    unnest = Func(F("tables"), function="unnest", output_field=CharField())
    found: dict[tuple[str, str], Top] = {}
    for kind, source in (("user", statements), ("server", statements),
                         ("table", statements.annotate(table=unnest))):  # fmt: skip
        ranked = (
            source.values("fingerprint", kind)
            .annotate(n=Count("id"))
            .annotate(
                rank=Window(
                    RowNumber(),
                    partition_by=F("fingerprint"),
                    order_by=[F("n").desc(), F(kind).asc(nulls_first=True)],
                ),
                distinct=Window(Count("*"), partition_by=F("fingerprint")),
            )
            .filter(rank__lte=TOP)
            .order_by("fingerprint", "rank")
        )
        for r in ranked:
            key = (kind, r["fingerprint"])
            top = found.setdefault(key, Top([], r["distinct"]))
            top.values.append((r[kind], r["n"]))
    return found


def without_sort(params: QueryDict) -> QueryDict:
    """The filters of a digest's query: its `sort` names a digest order, not the explorer's."""
    kept = params.copy()
    kept.pop("sort", None)
    return kept
