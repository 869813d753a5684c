"""The query parameters the API views share (pages, cursors, filters) and how the schema documents
them: the filters are the one source of truth for their types, choices and help texts."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet
from django.http import QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from investigations.api.schema import EMPTY_MEANS_ANY
from investigations.query.filters import STATEMENT_TYPE_PATTERN, EventFilter
from investigations.query.pages import BadCursor, Page, keyset_page

API_PAGE_SIZE = 100
API_MAX_PAGE_SIZE = 1000

_EVENT_EXAMPLES = {"table": "shop.orders", "statement_type": "DELETE", "since": "2026-01-05T00:00:00Z",
                   "until": "2026-01-06T00:00:00Z", "user": "alice", "host": "10.0.0.7", "server": "db1",
                   "database": "shop", "destructive": True, "flag": "no_where", "connection_id": 31,
                   "session": "db1/before-2026-01-05T09:00:00/31", "q": "orders",
                   "sort": "-server", "rows_changed_min": 100,
                   "fingerprint": "0x1C6B3F0A8E7D5C42"}  # fmt: skip


def param_parameters(filterset: type[django_filters.FilterSet], examples: dict) -> list[OpenApiParameter]:
    """A FilterSet's filters as documented query parameters (the filters are the one source of
    truth: their types, choices and help texts)."""
    parameters = []
    for name, f in filterset.base_filters.items():
        kind = OpenApiTypes.STR
        if isinstance(f, django_filters.NumberFilter):
            kind = OpenApiTypes.INT
        elif isinstance(f, django_filters.BooleanFilter):
            kind = OpenApiTypes.BOOL
        elif isinstance(f, django_filters.IsoDateTimeFilter):
            kind = OpenApiTypes.DATETIME
        choices = f.extra.get("choices") if isinstance(f, django_filters.ChoiceFilter) else None
        parameters.append(
            OpenApiParameter(
                name,
                kind,
                description=str(f.extra.get("help_text", "")),
                many=isinstance(f, django_filters.MultipleChoiceFilter),
                pattern=STATEMENT_TYPE_PATTERN if name == "statement_type" else None,
                # Statement types are open-ended: any upper-case phrase (the pattern) is taken, so
                # the classifier's known names are no enum (the schema would refuse what we accept).
                enum=[c[0] for c in choices] if choices and name != "statement_type" else None,
                examples=[OpenApiExample(name, value=examples[name])] if name in examples else [],
                extensions={EMPTY_MEANS_ANY: True},
            )
        )
    return parameters


def filter_parameters() -> list[OpenApiParameter]:
    """The explorer's event filters, as documented query parameters (without `sort`, which only
    the paged list applies: `sort_parameter`)."""
    return [p for p in param_parameters(EventFilter, _EVENT_EXAMPLES) if p.name != "sort"]


def sort_parameter() -> OpenApiParameter:
    return next(p for p in param_parameters(EventFilter, _EVENT_EXAMPLES) if p.name == "sort")


CURSOR_PARAMETER = OpenApiParameter(
    "cursor",
    str,
    description="Opaque cursor from a previous page's `next` link (follow `next` as it is)",
    examples=[OpenApiExample("a cursor", "WyIyMDI2LTAxLTA1VDA5OjAwOjAzLjQwMDAwMCswMDowMCIsIDEyMzRd")],
)
PAGE_SIZE_PARAMETER = OpenApiParameter(
    "page_size",
    int,
    description=f"Results a page: 1-{API_MAX_PAGE_SIZE}, default {API_PAGE_SIZE}",
    examples=[OpenApiExample("fifty", 50)],
)


def page_size(params: QueryDict) -> int:
    try:
        size = int(params.get("page_size", API_PAGE_SIZE))
    except ValueError:
        raise ValidationError({"page_size": "A whole number."}) from None
    return max(1, min(size, API_MAX_PAGE_SIZE))


def next_url(request: Request, key: str, cursor: str | None) -> str | None:
    """This request's URL with `key` set to `cursor` (None at the end of the listing)."""
    if not cursor:
        return None
    params = request.query_params.copy()
    params[key] = cursor
    return request.build_absolute_uri(request.path + "?" + params.urlencode())


def valid_qs(flt: django_filters.FilterSet) -> QuerySet:
    """The filter's queryset, or a 400 naming the parameters that are wrong."""
    if not flt.is_valid():
        raise ValidationError(flt.errors)
    return flt.qs


def keyset(queryset: QuerySet, request: Request, field: str = "occurred_at") -> Page:
    """The page the request's `cursor` and `page_size` ask for, newest first; a bad cursor is a 400."""
    try:
        params = request.query_params
        return keyset_page(queryset, params.get("cursor"), page_size(params), field)
    except BadCursor as e:
        raise ValidationError({"cursor": str(e)}) from None
