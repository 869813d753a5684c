"""`GET /api/v1/digest/`: the digest page's figures for a filter, as JSON."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from investigations import trail
from investigations.api.events import UtcDateTimeField
from investigations.api.params import filter_parameters
from investigations.api.schema import ErrorSerializer
from investigations.query.digest import DEFAULT_SORT, DIGEST_MS, SORTS, Digest, Top, digest, without_sort
from investigations.query.filters import filter_events
from investigations.query.limits import TooSlow, time_limit
from investigations.roles import Role, role_permission

API_DIGEST_ROWS, API_MAX_DIGEST_ROWS = 100, 500


class ValueCountSerializer(serializers.Serializer):
    value = serializers.CharField(allow_null=True, help_text="null: unknown (an account: unattributed)")
    count = serializers.IntegerField(help_text="Statements with it")


class TopSerializer(serializers.Serializer):
    top = ValueCountSerializer(many=True, help_text="The most frequent (at most 3), most first")
    distinct = serializers.IntegerField(help_text="How many distinct values there are")


class SampleSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The newest stored event of the fingerprint")
    sql = serializers.CharField(help_text="Its statement as stored (secrets masked), cut at 2,000 characters")
    truncated = serializers.BooleanField(help_text="Whether `sql` was cut")


class DigestRowSerializer(serializers.Serializer):
    query_id = serializers.CharField(help_text="`0x` + last 16 hex digits of the fingerprint's MD5")
    fingerprint = serializers.CharField(help_text="The statement with its literals as `?`")
    count = serializers.IntegerField()
    share = serializers.FloatField(help_text="Of the filter's statements, 0 to 1")
    destructive = serializers.IntegerField(help_text="Statements that could remove or overwrite data")
    destructive_share = serializers.FloatField(help_text="Of this fingerprint's statements, 0 to 1")
    first_seen = UtcDateTimeField(allow_null=True, help_text="UTC; null when no event has a time")
    last_seen = UtcDateTimeField(allow_null=True, help_text="UTC")
    accounts = TopSerializer(help_text="Users (account names)")
    servers = TopSerializer()
    tables = TopSerializer(help_text="`db.table` names its statements touch")
    sample = SampleSerializer()


class DigestSerializer(serializers.Serializer):
    statements = serializers.IntegerField(help_text="Events of the filter with a statement")
    fingerprints = serializers.IntegerField(help_text="Distinct fingerprints among them")
    without_statement = serializers.IntegerField(help_text="Events of the filter without one (Connect...)")
    sort = serializers.ChoiceField(choices=list(SORTS))
    more = serializers.IntegerField(help_text="Fingerprints not in `results` (beyond `limit`)")
    results = DigestRowSerializer(many=True)


class DigestTooSlow(APIException):
    status_code = 503
    default_detail = "The digest took too long: narrow the time range, or add a table or a user."
    default_code = "too_slow"


def _top(top: Top) -> dict:
    return {"top": [{"value": v, "count": n} for v, n in top.values], "distinct": top.distinct}


def digest_data(found: Digest) -> dict:
    return {
        "statements": found.statements,
        "fingerprints": found.fingerprints,
        "without_statement": found.without_statement,
        "sort": found.sort,
        "more": found.more,
        "results": [
            {
                "query_id": r.query_id,
                "fingerprint": r.fingerprint,
                "count": r.count,
                "share": r.share,
                "destructive": r.destructive,
                "destructive_share": r.destructive_share,
                "first_seen": r.first,
                "last_seen": r.last,
                "accounts": _top(r.accounts),
                "servers": _top(r.servers),
                "tables": _top(r.tables),
                "sample": {"id": r.sample_id, "sql": r.sample_sql, "truncated": r.sample_truncated},
            }
            for r in found.rows
        ],
    }


@extend_schema(
    parameters=[
        *filter_parameters(),
        OpenApiParameter(
            "sort",
            str,
            enum=list(SORTS),
            description="`count` (most first, the default), `first` (first seen, earliest first), "
            "`last` (last seen, newest first) or `destructive` (most destructive first)",
            examples=[OpenApiExample("most destructive first", "destructive")],
        ),
        OpenApiParameter(
            "limit",
            int,
            description=f"Fingerprints returned: 1-{API_MAX_DIGEST_ROWS}, default {API_DIGEST_ROWS}",
            examples=[OpenApiExample("twenty", 20)],
        ),
    ],
    responses={
        200: DigestSerializer,
        503: OpenApiResponse(ErrorSerializer, description="The digest took too long: narrow the filter"),
    },
    summary="The filter's statements grouped by fingerprint (a query digest)",
    operation_id="digest",
    description=(
        "As pt-query-digest reports a log: one result per statement fingerprint (literals as `?`) "
        "with its count and share, destructive count and share, top accounts, servers and tables "
        "with how many distinct there are, first and last time, and a sample statement. The "
        "filters are those of /api/v1/events/; `fingerprint=<query_id>` there lists one result's "
        "events. PostgreSQL aggregates under a time limit: a filter that takes too long answers "
        "503 (narrow it)."
    ),
)
@api_view(["GET"])
@permission_classes([role_permission(Role.VIEWER)])
def digest_list(request: Request) -> Response:
    params = request.query_params
    flt = filter_events(without_sort(params))  # `sort` here orders the digest, not the events
    if not flt.is_valid():
        raise ValidationError(flt.errors)
    sort = params.get("sort") or DEFAULT_SORT
    if sort not in SORTS:
        raise ValidationError({"sort": f"One of {', '.join(SORTS)}."})
    try:
        limit = int(params.get("limit", API_DIGEST_ROWS))
    except ValueError:
        raise ValidationError({"limit": "A whole number."}) from None
    limit = max(1, min(limit, API_MAX_DIGEST_ROWS))
    try:
        with time_limit(DIGEST_MS):
            found = digest(flt.qs, sort=sort, limit=limit)
    except TooSlow:
        raise DigestTooSlow() from None
    trail.record(request, trail.Action.SEARCH, where="api digest", filters=trail.filters_of(params),
                 shown=len(found.rows))  # fmt: skip
    return Response(DigestSerializer(digest_data(found)).data)
