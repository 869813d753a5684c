"""The explorer's export buttons: every event of the current search as CSV or NDJSON, streamed by
the API's exporter (`query.export.export_lines`), under the API export's role and bounds."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from investigations import trail
from investigations.query.export import export_lines
from investigations.query.filters import filter_events
from investigations.roles import Role, role_required

FORMATS = {
    "csv": ("csv", "text/csv; charset=utf-8"),
    "ndjson": ("auditweb", "application/x-ndjson"),
    "ecs.ndjson": ("ecs", "application/x-ndjson"),
}
NOT_FILTERS = ("cursor", "tz", "range", "sort")  # the page's state, not what is exported


@require_GET
@role_required(Role.VIEWER)
def event_export(request: HttpRequest, fmt: str) -> HttpResponse:
    """All events of the explorer's filter (not only the page shown), oldest first."""
    params = request.GET.copy()
    for name in NOT_FILTERS:
        params.pop(name, None)
    flt = filter_events(params)
    if not flt.is_valid():
        return HttpResponse(json.dumps(flt.errors), status=400, content_type="application/json")
    schema, content_type = FORMATS[fmt]
    filters = trail.filters_of(params)
    trail.record(request, trail.Action.EXPORT, where="explorer", filters=filters, schema=schema)
    response = StreamingHttpResponse(export_lines(flt.qs, schema), content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="auditweb-events-{stamp}.{fmt}"'
    return response
