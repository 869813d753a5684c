"""Binary log rows that no logged statement explains, and one binlog row statement's rows."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from ingest.models import BinlogStatement
from investigations import trail
from investigations.query.binlog import UNEXPLAINED_PAGE, statements_shown, unexplained
from investigations.roles import Role, role_required
from investigations.views.events import whole_number


@require_GET
@role_required(Role.VIEWER)
def binlog_unexplained(request: HttpRequest) -> HttpResponse:
    """Row changes of the binary logs that no statement of the logs explains, newest first."""
    server = request.GET.get("server", "").strip()[:200]
    table = request.GET.get("table", "").strip()[:400]
    page = whole_number(request.GET.get("page"))
    found = unexplained(server or None, table or None)
    shown = list(found[(page - 1) * UNEXPLAINED_PAGE : page * UNEXPLAINED_PAGE + 1])
    context = {
        "statements": shown[:UNEXPLAINED_PAGE],
        "more": len(shown) > UNEXPLAINED_PAGE,
        "page": page,
        "server": server,
        "table": table,
    }
    return render(request, "investigations/binlog_unexplained.html", context)


@require_GET
@role_required(Role.VIEWER)
def binlog_statement(request: HttpRequest, statement_id: int) -> HttpResponse:
    """One binlog row statement: its rows (paged, changed cells marked) and what the join said."""
    statement = get_object_or_404(
        BinlogStatement.objects.select_related("transaction__file__source_file"), pk=statement_id
    )
    server = statement.transaction.server
    trail.record(request, trail.Action.EVENT_VIEW, binlog_statement=statement.pk, server=server)
    context = {
        "statement": statement,
        "binlog": statements_shown([statement], whole_number(request.GET.get("rows_page")), None),
    }
    return render(request, "investigations/binlog_statement.html", context)
