"""The OpenAPI schema says what every API call may answer, errors included.

drf-spectacular documents the answers a view declares (200, 201, 202); every API view can
also answer 400 (a parameter or body it refuses), 401 (no or a bad token), 403 (a role too
low) and, for one object, 404. A client generated from the schema, and Schemathesis in CI,
rely on those being listed with their bodies, so `ErrorAwareAutoSchema` adds them to each
operation that does not declare its own.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, in words")


_REFUSED = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="A parameter or field was refused: an object naming each, with what is wrong "
    '(e.g. `{"since": ["Enter a valid date/time."]}`)',
)
_NO_TOKEN = OpenApiResponse(ErrorSerializer, description="No token, or one that is wrong, expired or revoked")
_NO_ROLE = OpenApiResponse(ErrorSerializer, description="The token's user lacks the role this needs")
_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such object")


class ErrorAwareAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        errors = {"400": _REFUSED, "401": _NO_TOKEN, "403": _NO_ROLE}
        if "{" in self.path:
            errors["404"] = _NOT_FOUND
        for code, response in errors.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(response, code, direction=direction)
        return responses


EMPTY_MEANS_ANY = "x-empty-means-any"  # marks a filter parameter (see allow_empty_filters)


def allow_empty_filters(result: dict, generator: Any, request: Any, public: bool) -> dict:
    """A postprocessing hook: a filter given empty (`?user=&server=db1`, as an HTML form sends
    its blank fields) counts as not given, which OpenAPI says with `allowEmptyValue`.
    drf-spectacular has no option for it, so filter parameters carry a mark that becomes it."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.pop(EMPTY_MEANS_ANY, False):
                    parameter["allowEmptyValue"] = True
    return result


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404 for a URL that matches nothing: JSON under /api/ (a client reads `detail`), the page
    elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
