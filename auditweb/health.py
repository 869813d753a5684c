"""`/healthz`: whether this web process can do its work, for a container's healthcheck.

Answered by a middleware placed first, before the host check and the HTTPS redirect: the probe
comes from inside the container (`http://127.0.0.1:8000/healthz`), whose address is not one of
ALLOWED_HOSTS and which speaks plain HTTP. The answer names no path and holds no data.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

HEALTH_PATH = "/healthz"


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure to reach PostgreSQL is the answer, not an error page
        return f"unavailable ({type(exc).__name__})"
    return "ok"


def _writable_folder(folder: Path) -> str:
    """Uploads are written here by web and reports read from it: a missing volume or one
    owned by another user shows here instead of at the first upload or download."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot be created ({type(exc).__name__})"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "not writable"
    return "ok"


def health_status() -> tuple[bool, dict[str, str]]:
    """Each check's verdict, and whether all are ok."""
    checks = {
        "database": _database(),
        "upload_dir": _writable_folder(Path(settings.UPLOAD_DIR)),
        "report_dir": _writable_folder(Path(settings.REPORT_DIR)),
    }
    return all(value == "ok" for value in checks.values()), checks


class HealthCheckMiddleware:
    """Answers GET and HEAD of /healthz: 200 when every check is ok, else 503."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info != HEALTH_PATH or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        healthy, checks = health_status()
        response = JsonResponse({"status": "ok" if healthy else "unhealthy", **checks})
        response.status_code = 200 if healthy else 503
        response["Cache-Control"] = "no-store"
        return response
