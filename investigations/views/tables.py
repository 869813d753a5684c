"""Tables: the names seen in the events, and one table's history under all its names."""

from __future__ import annotations

from django.db.models import Count, Max, Min
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ingest.models import Event
from investigations.models import TableSeen
from investigations.query.binlog import unexplained
from investigations.query.binlog_state import servers_of
from investigations.query.blast import mark_rows
from investigations.query.filters import filter_events
from investigations.query.limits import count_upto
from investigations.query.pages import BadCursor, keyset_page
from investigations.query.renames import renamed_from, renamed_to
from investigations.query.tables import tables_seen, tables_seen_refresh_due
from investigations.roles import Role, role_required
from investigations.tasks import queue_tables_refresh
from investigations.views.shared import htmx_template

TABLES_SHOWN = 300
HISTORY_PAGE = 50
CHANGERS_SHOWN = 30
UNQUALIFIED_COUNTED = 10_000  # statements naming the table without a database: counted up to this


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def table_list(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()[:400]
    tables_seen_refresh_due(queue_tables_refresh)
    context = {"listing": tables_seen(search, TABLES_SHOWN), "search": search, "shown": TABLES_SHOWN}
    context["zone"] = timezone.get_current_timezone_name()  # htmx's swap renders just the partial
    return render(request, htmx_template(request, "investigations/table_list.html", "tables"), context)


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def table_detail(request: HttpRequest, name: str) -> HttpResponse:
    """Everything that touched the table, newest first, following its renames; who changed it."""
    params = {"table": name}
    if request.GET.get("destructive") == "true":
        params["destructive"] = "true"
    flt = filter_events(params)
    page, error = None, None
    if flt.is_valid():
        try:
            events = flt.qs.select_related("session").defer("raw_inline", "fingerprint")
            page = keyset_page(events, request.GET.get("cursor"), HISTORY_PAGE)
            mark_rows(page.items)
        except BadCursor as e:
            error = str(e)
    next_query = None
    if page and page.next_cursor:
        query = request.GET.copy()
        query["cursor"] = page.next_cursor
        next_query = query.urlencode()
    changers = (
        filter_events({"table": name, "destructive": "true"})
        .qs.order_by()
        .values("user", "host", "statement_type")
        .annotate(n=Count("*"), first=Min("occurred_at"), last=Max("occurred_at"))
        .order_by("-last")[:CHANGERS_SHOWN]
    )
    context = {
        "name": name,
        "unqualified": _unqualified(name),
        "seen": TableSeen.objects.filter(name=name).first(),
        "page": page,
        "error": error,
        "next_query": next_query,
        "first_page": not request.GET.get("cursor"),
        "destructive_only": "destructive" in params,
        "changers": list(changers),
        "later_names": renamed_to([name]) if "." in name else [],
        "earlier_names": renamed_from(name) if "." in name else [],
        # Binlog rows of this table no statement explains (a replica, a routine, a scheduled job).
        "unexplained": unexplained(table=name).count() if "." in name else 0,
        "rows_column": True,
        # The table as it was at a time, from the binlog: offered where its binlogs changed rows.
        "binlog_servers": servers_of(name) if "." in name else [],
    }
    return render(request, htmx_template(request, "investigations/table_detail.html", "history"), context)


def _unqualified(name: str) -> dict[str, object] | None:
    """Destructive statements that name the table without a database (their connection began before
    the log, so its database is unknown): they may be this table's, and the page says so rather
    than count them as its own or leave them out unsaid."""
    if "." not in name:
        return None
    bare = name.split(".", 1)[1]
    found = Event.objects.filter(tables__contains=[bare], destructive=True)
    count, more = count_upto(found, UNQUALIFIED_COUNTED)
    return {"bare": bare, "count": count, "more": more} if count else None
