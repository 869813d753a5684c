"""Production settings: `manage.py check --deploy` is clean, and a real response carries the
security headers and secure cookies. Each runs Django in a subprocess with the environment a
deployment sets (settings are read once, at start)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = "auditweb.example.com"


def production_env(**extra: str) -> dict[str, str]:
    """What a deployment behind TLS sets (README, .env.example); nothing from a developer's shell."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DATABASE_URL", "REDIS_URL")}
    return {**keep, "DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": HOST,
            "CSRF_TRUSTED_ORIGINS": f"https://{HOST}", "HTTPS": "true", **extra}  # fmt: skip


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_production_settings() -> None:
    done = manage(production_env(), "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_check_deploy_warns_when_tls_is_not_said() -> None:
    """The check above is not vacuous: without HTTPS=true, HSTS and secure cookies are missing."""
    env = production_env()
    del env["HTTPS"]
    done = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stdout + done.stderr, warning


HEADERS_SCRIPT = f"""
import json
from django.conf import settings
from django.test import Client
client = Client(HTTP_HOST={HOST!r})
plain = client.get("/accounts/login/")
page = client.get("/accounts/login/", secure=True)
csrf = page.cookies["csrftoken"]
print(json.dumps({{
    "plain": [plain.status_code, plain.get("Location", "")],
    "status": page.status_code,
    "headers": dict(page.headers),
    "csrf_cookie": {{"secure": bool(csrf["secure"]), "samesite": csrf["samesite"]}},
    "session_cookie_secure": settings.SESSION_COOKIE_SECURE,
    "proxy": settings.SECURE_PROXY_SSL_HEADER,
}}))
"""


def test_a_response_carries_the_security_headers_and_secure_cookies() -> None:
    done = manage(production_env(TRUST_X_FORWARDED_PROTO="true"), "shell", "-c", HEADERS_SCRIPT)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["plain"] == [301, f"https://{HOST}/accounts/login/"]  # plain HTTP goes to HTTPS
    headers = seen["headers"]
    assert seen["status"] == 200
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["X-Content-Type-Options"] == "nosniff"
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert seen["csrf_cookie"]["secure"] and seen["session_cookie_secure"]
    assert seen["proxy"] == ["HTTP_X_FORWARDED_PROTO", "https"]
