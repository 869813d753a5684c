from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

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
