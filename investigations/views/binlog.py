"""Binary log rows that no logged statement explains, one binlog row statement's rows, and a
table as it was at a time T."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db.models import Max, Min
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from ingest.models import BinlogFile, BinlogStatement, Event
from investigations import trail
from investigations.query import binlog_state
from investigations.query.binlog import CELL_CHARS, UNEXPLAINED_PAGE, statements_shown, unexplained
from investigations.query.binlog_state import (
    MAX_DECODED,
    STATE_PAGE,
    BadStateCursor,
    binlog_gaps,
    servers_of,
)
from investigations.query.fields import UtcDateTimeField
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


@dataclass(frozen=True)
class Who:
    """What the join says of the statement that made a row change."""

    statement: BinlogStatement
    event: Event | None  # linked for sure
    candidates: list[int]  # ambiguous, or the CALLs near an unlinked routine's rows


@dataclass(frozen=True)
class ShownRow:
    present: bool
    cells: list[tuple[str, bool]]  # (value, a key column)
    decided_by_last: bool
    change: str
    committed_at: datetime
    who: Who
    complete: bool


def _who(statements: dict[int, BinlogStatement], events: dict[int, Event], statement_id: int) -> Who:
    s = statements[statement_id]
    sure = s.event_id is not None and s.confidence in BinlogStatement.SURE
    return Who(s, events.get(s.event_id) if sure and s.event_id else None, list(s.candidates))


def _at_form(request: HttpRequest) -> tuple[datetime | None, str | None]:
    raw = request.GET.get("at", "").strip()[:64]
    if not raw:
        return None, None
    try:
        return UtcDateTimeField().clean(raw), None
    except ValidationError:
        return None, "Give the time as 2026-11-25 01:22:04 (in the page's zone) or ISO 8601."


@require_GET
@role_required(Role.VIEWER)
def table_at(request: HttpRequest) -> HttpResponse:
    """The table as it was at a time T: the rows its binlog changes touched, rebuilt from their
    images (investigations.query.binlog_state), each with the statement that last changed it."""
    table = request.GET.get("table", "").strip()[:400]
    servers = servers_of(table) if table else []
    server = request.GET.get("server", "").strip()[:200] or (servers[0] if len(servers) == 1 else "")
    at, error = _at_form(request)
    context: dict[str, object] = {
        "table": table,
        "servers": servers,
        "server": server,
        "at": at,
        "at_text": request.GET.get("at", "")[:64],
        "error": error,
        "page_size": STATE_PAGE,
        "max_decoded": MAX_DECODED,
    }
    if server:
        files = BinlogFile.objects.filter(server=server)
        spans = files.aggregate(first=Min("first_time"), last=Max("last_time"))
        context["span"] = (spans["first"], spans["last"]) if spans["first"] else None
        context["missing"] = binlog_gaps(server)
    if table and server in servers and at is not None:
        try:
            page = binlog_state.table_at(server, table, at, cursor=request.GET.get("cursor") or None)
        except BadStateCursor as e:
            context["error"] = str(e)
        else:
            trail.record(request, trail.Action.EVENT_VIEW, table=table, server=server, what="table at", at=at)
            context.update(_shown_page(page, request))
    return render(request, "investigations/table_at.html", context)


def _shown_page(page: binlog_state.StatePage, request: HttpRequest) -> dict[str, object]:
    statements = binlog_state.statements_by_id({r.ref.statement_id for r in page.rows})
    event_ids = {s.event_id for s in statements.values() if s.event_id}
    events = {e.pk: e for e in Event.objects.filter(pk__in=event_ids).defer("raw_inline", "fingerprint")}
    keys = set(page.key_columns)
    rows = []
    for r in page.rows:
        image = binlog_state.shown_image(r.image)
        key_image = dict(zip(page.key_columns, [v for _, v in r.key], strict=False)) if keys else {}
        cells = []
        for c in page.columns:
            if image is not None and c in image:
                cells.append((_cell(image[c]), c in keys))
            elif c in key_image:
                cells.append((_cell(key_image[c]), True))
            else:
                cells.append(("", c in keys))
        rows.append(
            ShownRow(
                present=r.image is not None,
                cells=cells,
                decided_by_last=r.decided_by_last,
                change=r.ref.change,
                committed_at=r.ref.committed_at,
                who=_who(statements, events, r.ref.statement_id),
                complete=r.complete,
            )
        )
    next_query = None
    if page.next_cursor:
        query = request.GET.copy()
        query["cursor"] = page.next_cursor
        next_query = query.urlencode()
    first = request.GET.copy()
    first.pop("cursor", None)
    return {
        "page": page,
        "rows": rows,
        "next_query": next_query,
        "first_query": first.urlencode() if request.GET.get("cursor") else None,
    }


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    text = "base64 " + str(next(iter(value.values()), "")) if isinstance(value, dict) else str(value)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "…"
