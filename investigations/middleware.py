from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from functools import lru_cache
from zoneinfo import ZoneInfo

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

# Everything is served from our own origin; no inline script or style is allowed.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # The API's browsable docs page (drf-spectacular) brings its own policy needs.
        if not request.path.startswith("/api/docs/"):
            response.headers.setdefault("Content-Security-Policy", CSP)
        return response


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
