from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from functools import lru_cache
from zoneinfo import ZoneInfo

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils import timezone

# Everything is served from our own origin; no inline script or style is allowed.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    """The policy above on every answer, the API's docs page included (its template is ours,
    templates/drf_spectacular/, without the inline style drf-spectacular's has), and
    `Cache-Control: no-store` on every answer AuditWeb makes (static files are served before
    this, by WhiteNoise): evidence pages, API answers and downloads must not stay in a browser's
    or a proxy's cache after the login ends."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        if "no-store" not in response.get("Cache-Control", ""):
            response["Cache-Control"] = "no-store"
        return response


NUL_REFUSED = "A NUL character (%00) is in the address or its parameters: no search or page takes one."


class RefuseNulMiddleware:
    """400 for a request whose path or query parameters hold NUL. PostgreSQL text cannot hold it,
    so such a value reached a query or the audit trail's JSON as a 500; no filter, cursor or name
    AuditWeb knows can contain one. (Form and JSON bodies are checked by their fields: Django's
    and DRF's CharField refuse NUL.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or any(
            "\x00" in key or any("\x00" in v for v in values) for key, values in request.GET.lists()
        ):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": NUL_REFUSED}, status=400)
            return HttpResponseBadRequest(NUL_REFUSED, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


TZ_COOKIE = "tz"  # set by static/js/auditweb.js to the browser's zone


@lru_cache(maxsize=1)
def known_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def zone_named(name: str | None) -> ZoneInfo | None:
    """The IANA zone of that name, or None for anything else (a cookie or URL is the viewer's text)."""
    if name and name in known_zones():
        return ZoneInfo(name)
    return None


class TimezoneMiddleware:
    """Pages show times in the page's zone: the URL's `tz` (so a shared link shows what its
    sender saw, and its naive From/Until mean the same instants), else the viewer's browser
    zone (cookie), else settings.TIME_ZONE. The API always speaks UTC and ignores both."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            return self.get_response(request)
        zone = zone_named(request.GET.get("tz")) or zone_named(request.COOKIES.get(TZ_COOKIE))
        if zone is None:
            return self.get_response(request)
        with timezone.override(zone):
            return self.get_response(request)
