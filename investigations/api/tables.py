"""Tables in the API: every name the events mention with its counts, and one table's history under
all its names (renames followed forward from the moment of each)."""

from __future__ import annotations

from urllib.parse import quote

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from investigations import trail
from investigations.api.events import EventPageSerializer, UtcDateTimeField
from investigations.api.params import (
    CURSOR_PARAMETER,
    PAGE_SIZE_PARAMETER,
    filter_parameters,
    keyset,
    next_url,
    page_size,
    valid_qs,
)
from investigations.models import TableSeen
from investigations.query.filters import filter_events
from investigations.query.renames import renamed_from, renamed_to
from investigations.query.tables import tables_seen, tables_seen_refresh_due
from investigations.roles import Role, role_permission
from investigations.tasks import queue_tables_refresh

TABLES_MAX = 1000


class TableSerializer(serializers.ModelSerializer):
    first_at = UtcDateTimeField(read_only=True, allow_null=True, help_text="First event naming it (UTC)")
    last_at = UtcDateTimeField(read_only=True, allow_null=True, help_text="Last event naming it (UTC)")
    history = serializers.SerializerMethodField()

    class Meta:
        model = TableSeen
        fields = ["name", "events", "destructive", "first_at", "last_at", "history"]

    def get_history(self, table: TableSeen) -> str:
        """The URL of its history (`/api/v1/tables/<name>/history/`)."""
        path = "/api/v1/tables/" + quote(table.name, safe="") + "/history/"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class TablePageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The following page, or null at the end")
    refreshed_at = UtcDateTimeField(
        allow_null=True, help_text="When the kept counts were last rebuilt (a rebuild is queued when stale)"
    )
    unlisted = serializers.IntegerField(
        help_text="Events stored since that rebuild whose tables are not listed yet (0: none left out)"
    )
    results = TableSerializer(many=True)


class RenameSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="`db.table`")
    since = UtcDateTimeField(help_text="When the table took (or gave up) that name (UTC)")


class TableHistorySerializer(EventPageSerializer):
    name = serializers.CharField(help_text="The table asked about")
    later_names = RenameSerializer(many=True, help_text="The names it was given later, followed forward")
    earlier_names = RenameSerializer(many=True, help_text="The names it had before (one step back)")

    class Meta:
        fields = ["name", "later_names", "earlier_names", "next", "results"]


@extend_schema(
    parameters=[
        OpenApiParameter(
            "q",
            str,
            description="Text in the name (any case); empty: every table",
            examples=[OpenApiExample("orders", "orders")],
        ),
        OpenApiParameter(
            "after",
            str,
            description="Continue after this name (the `next` link sets it)",
            examples=[OpenApiExample("after shop.orders", "shop.orders")],
        ),
        PAGE_SIZE_PARAMETER,
    ],
    responses=TablePageSerializer,
    summary="Tables the events name, by name",
    operation_id="tables_list",
    description=(
        "Every `db.table` some event named, with how many events and destructive events, and the "
        "first and last time. The counts are kept and rebuilt in the background every few minutes "
        "(`refreshed_at`); names that only newer events mention are looked up on the fly."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def table_list(request: Request) -> Response:
    params = request.query_params
    size = min(page_size(params), TABLES_MAX)
    search, after = params.get("q", "").strip()[:400], params.get("after", "")[:400]
    if "\x00" in search + after:  # PostgreSQL text holds no NUL, and no table name has one
        raise ValidationError({"q": "No NUL characters."})
    tables_seen_refresh_due(queue_tables_refresh)
    listing = tables_seen(search, size, after=after)
    last = listing.tables[-1].name if listing.more and listing.tables else None
    return Response(
        {
            "next": next_url(request, "after", last),
            "refreshed_at": TablePageSerializer()
            .fields["refreshed_at"]
            .to_representation(listing.refreshed_at),
            "unlisted": listing.unlisted,
            "results": TableSerializer(listing.tables, many=True, context={"request": request}).data,
        }
    )


_HISTORY_FILTERS = [p for p in filter_parameters() if p.name != "table"]


@extend_schema(
    parameters=[
        OpenApiParameter(
            "name",
            str,
            OpenApiParameter.PATH,
            description="`db.table`, or a bare name matching it in any database (URL-encoded)",
            examples=[OpenApiExample("orders", "shop.orders")],
        ),
        *_HISTORY_FILTERS,
        CURSOR_PARAMETER,
        PAGE_SIZE_PARAMETER,
    ],
    responses=TableHistorySerializer,
    summary="Everything that touched a table, following its renames",
    operation_id="tables_history",
    description=(
        "The events naming the table, newest first, and, from the moment of each rename (RENAME "
        "TABLE, ALTER TABLE ... RENAME), those naming it under its later names: what happened to "
        "`shop.orders_old` after `orders` became it is part of the history of `shop.orders`. The "
        "other event filters narrow it further (e.g. `destructive=true`)."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def table_history(request: Request, name: str) -> Response:
    params = request.query_params.copy()
    params["table"] = name
    events = valid_qs(filter_events(params)).select_related("session", "source_file")
    page = keyset(events, request)
    filters = trail.filters_of(params)
    trail.record(request, trail.Action.SEARCH, where="api", filters=filters, shown=len(page.items))
    qualified = "." in name  # (renames are followed by qualified names, as the table page does)
    later = renamed_to([name]) if qualified else []
    earlier = renamed_from(name) if qualified else []
    return Response(
        TableHistorySerializer(
            {
                "name": name,
                "later_names": [{"name": n, "since": t} for n, t in later],
                "earlier_names": [{"name": n, "since": t} for n, t in earlier],
                "next": next_url(request, "cursor", page.next_cursor),
                "results": page.items,
            }
        ).data
    )
