"""Gaps in the API: time the logs show was not recorded, with the record that shows it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.models import Gap
from investigations.api.events import UtcDateTimeField
from investigations.api.params import (
    CURSOR_PARAMETER,
    PAGE_SIZE_PARAMETER,
    keyset,
    next_url,
    param_parameters,
    valid_qs,
)
from investigations.query.gaps import GapFilter, filter_gaps
from investigations.roles import Role, role_permission

_GAP_EXAMPLES = {"server": "db1", "source": 1, "since": "2026-01-05T00:00:00Z",
                 "until": "2026-01-06T00:00:00Z", "reason": "logging_off", "open": True}  # fmt: skip


class GapPositionSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The source's id")
    name = serializers.CharField(help_text="The source's name")
    file = serializers.CharField(help_text="Path of the file whose record shows the gap")
    line = serializers.IntegerField(help_text="Line of that record")
    offset = serializers.IntegerField(help_text="Byte offset of that record")


class GapSerializer(serializers.ModelSerializer):
    started_at = UtcDateTimeField(
        read_only=True, allow_null=True, help_text="Last time recorded before it (UTC; null: unknown)"
    )
    ended_at = UtcDateTimeField(
        read_only=True, allow_null=True, help_text="First time recorded after it (UTC; null: still open)"
    )
    source = serializers.SerializerMethodField()

    class Meta:
        model = Gap
        fields = ["id", "server", "reason", "started_at", "ended_at", "detail", "source"]

    @extend_schema_field(GapPositionSerializer)
    def get_source(self, gap: Gap) -> dict:
        f = gap.source_file
        position = {"file": f.path, "line": gap.line, "offset": gap.byte_offset}
        return {"id": f.source_id, "name": f.source.name, **position}


class GapPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The following page, or null at the end")
    results = GapSerializer(many=True)


@extend_schema(
    parameters=[
        *param_parameters(GapFilter, _GAP_EXAMPLES),
        CURSOR_PARAMETER,
        PAGE_SIZE_PARAMETER,
    ],
    responses=GapPageSerializer,
    summary="Gaps: time the logs show was not recorded",
    operation_id="gaps_list",
    description=(
        "Logging switched off (until the next record), the log (re)opened, a restart, the clock "
        "going back: from the last record before to the first after, newest first, with the record "
        "that shows it. `since`/`until` select gaps overlapping that window. The absence of evidence "
        "in a gap is not evidence of absence."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def gap_list(request: Request) -> Response:
    page = keyset(valid_qs(filter_gaps(request.query_params)), request, field="started_at")
    return Response(
        {
            "next": next_url(request, "cursor", page.next_cursor),
            "results": GapSerializer(page.items, many=True).data,
        }
    )
