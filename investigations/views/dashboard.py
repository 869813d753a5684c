"""The dashboard: what needs a look (recent destructive and anti-forensic events, gaps, sources, ingests)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ingest.models import Event, IngestRun, Source
from ingest.sources import source_health, source_state_counts
from investigations.query.blast import largest_destructive
from investigations.query.filters import filter_events
from investigations.query.gaps import recent_gaps
from investigations.roles import Role, role_required
from investigations.views.shared import htmx_template

DASHBOARD_NEWEST = 10
ACTIVE_RUNS = (IngestRun.Status.QUEUED, IngestRun.Status.RUNNING)
# The periods of the largest destructive statements (by rows changed): `?period=`, default 7 days.
PERIODS = {"24h": ("24 hours", timedelta(days=1)), "7d": ("7 days", timedelta(days=7)),
           "30d": ("30 days", timedelta(days=30)), "all": ("all time", None)}  # fmt: skip
LARGEST_SHOWN = 10
WATCHED = {"Destructive": {"destructive": "true"}, "Anti-forensic": {"flag": "anti_forensic"}}


def _recent_counts(now: datetime) -> list[dict[str, object]]:
    """Destructive and anti-forensic events of the last 24 hours and 7 days, each count with the
    explorer's query that lists them (From in the page's zone)."""
    rows = []
    for label, params in WATCHED.items():
        windows = []
        for window, since in (("24 hours", now - timedelta(days=1)), ("7 days", now - timedelta(days=7))):
            count = filter_events({**params, "since": since.isoformat()}).qs.count()
            local = timezone.localtime(since).strftime("%Y-%m-%dT%H:%M:%S")
            query = _urlencode({**params, "since": local, "tz": timezone.get_current_timezone_name()})
            windows.append({"window": window, "count": count, "query": query})
        rows.append({"label": label, "windows": windows})
    return rows


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def dashboard(request: HttpRequest) -> HttpResponse:
    """What needs a look: recent destructive and anti-forensic events, gaps, sources, ingests."""
    newest = filter_events({"destructive": "true"}).qs.filter(occurred_at__isnull=False).defer("raw_inline")
    anti = filter_events({"flag": "anti_forensic"}).qs.filter(occurred_at__isnull=False).defer("raw_inline")
    sources = [(s, source_health(s)) for s in Source.objects.order_by("name")]
    period = request.GET.get("period", "7d")
    period = period if period in PERIODS else "7d"
    label, span = PERIODS[period]
    largest = largest_destructive(timezone.now() - span if span else None, LARGEST_SHOWN)
    runs = IngestRun.objects.filter(status__in=ACTIVE_RUNS).select_related("source", "source_file")
    context = {
        "counts": _recent_counts(timezone.now()),
        "newest": newest.order_by("-occurred_at", "-id")[:DASHBOARD_NEWEST],
        "anti": anti.order_by("-occurred_at", "-id")[:DASHBOARD_NEWEST],
        "gaps": recent_gaps(DASHBOARD_NEWEST),
        "sources": sources,
        "attention": [(s, h) for s, h in sources if h.needs_attention],
        "source_states": source_state_counts(h for _, h in sources),
        "runs": runs.order_by("started_at"),
        "has_events": Event.objects.exists(),
        "largest": largest,
        "period": period,
        "period_label": label,
        "periods": [(key, name) for key, (name, _) in PERIODS.items()],
    }
    return render(request, htmx_template(request, "investigations/dashboard.html", "running"), context)


def _urlencode(params: dict[str, str]) -> str:
    query = QueryDict(mutable=True)
    query.update(params)
    return query.urlencode()
