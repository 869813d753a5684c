"""The browser tests' Chromium and its tab: Debian's /usr/bin/chromium driven by Playwright.

Skipped, with the reason, where /usr/bin/chromium (apt-get install chromium) or the playwright
package (requirements.lock) is missing. Playwright never downloads a browser here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]  # fmt: skip
PASSWORD = "correct horse battery staple"  # the investigator persona's (tests/conftest.py)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.skip(f"Chromium is not installed ({CHROMIUM}): apt-get install chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    # Playwright's sync API runs an event loop in this thread; the tests' own ORM calls are
    # synchronous and safe, which Django cannot tell.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_api.sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
            yield chromium
            chromium.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


class Visit:
    """One browser tab, logged in as the investigator, noting what a page must never do."""

    def __init__(self, browser, live_server) -> None:
        self.url = live_server.url
        self.context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="UTC")
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.loads = 0
        self.errors: list[str] = []  # the console's: a CSP violation, an htmx syntax error...
        self.page.on("console", self._console)
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("load", lambda _: setattr(self, "loads", self.loads + 1))

    def _console(self, message) -> None:
        # htmx logs a request it dropped for a newer one (hx-sync replace) as an error: not one.
        aborted = message.text.startswith(("htmx:afterRequest", "htmx:sendAbort"))
        if message.type == "error" and not aborted:
            self.errors.append(message.text)

    def log_in(self) -> None:
        page = self.page
        page.goto(self.url + "/events/")
        assert "/accounts/login/" in page.url  # every page asks for a login first
        page.fill("#id_username", "ivy")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(self.url + "/events/")

    def rows(self) -> list[str]:
        return [t.strip() for t in self.page.locator("#event-table td.sql").all_inner_texts()]

    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.page.url).query)

    def settled(self) -> None:
        self.page.wait_for_load_state("networkidle")


@pytest.fixture
def visit(browser, live_server, investigator) -> Iterator[Visit]:
    v = Visit(browser, live_server)
    yield v
    v.context.close()
