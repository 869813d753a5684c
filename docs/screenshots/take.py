"""Screenshots of AuditWeb's pages at 1280x800, into docs/screenshots/.

    # against a running AuditWeb (./dev demo prints the admin password once):
    .venv/bin/python docs/screenshots/take.py --url http://127.0.0.1:8000 --username admin --password ...
    # or on a scratch database of your own: migrated, the sample logs ingested as ./dev demo does,
    # a login made, and `manage.py runserver` started here and stopped at the end
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/auditweb_shots .venv/bin/python docs/screenshots/take.py

Drives Debian's Chromium (/usr/bin/chromium, `apt-get install chromium`) with Playwright, never a
downloaded browser. The browser's zone is Europe/Berlin, so the pages show local times with UTC on
hover. The story is the demo's (README "Quick start"): against `./dev demo` every page has its
data, the followed sources their health; bob's DELETE without a WHERE on demo-silent is pinned.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
USERNAME, PASSWORD = "screenshots", "screenshots-password-1"


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """Migrate DATABASE_URL, ingest the samples, make a login, and serve it on a free port."""
    env = dict(os.environ, DEBUG="false", SECRET_KEY=os.environ.get("SECRET_KEY", "screenshots"))
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=REPO)
    sys.path.insert(0, str(REPO))
    # Imported here, once REPO is on the path: the sample logs as ./dev demo ingests them.
    from devtools.demo import sample_logs

    for _, server, files in sample_logs():
        subprocess.run([*manage, "ingest", *files, "--server", server], env=env, check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    make_login = (
        "from django.contrib.auth import get_user_model; U = get_user_model();"
        f" u, _ = U.objects.get_or_create(username={USERNAME!r}); u.set_password({PASSWORD!r});"
        " u.is_staff = True; u.save();"
        " from investigations.roles import Role, set_role; set_role(u, Role.ADMIN)"
    )
    subprocess.run(
        [*manage, "shell", "-c", make_login], env=env, check=True, cwd=REPO, stdout=subprocess.DEVNULL
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env["DEBUG"] = "true"  # runserver serves the static files only with DEBUG on
    server = subprocess.Popen(
        [*manage, "runserver", "--noreload", f"127.0.0.1:{port}"],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{url}/accounts/login/", timeout=2)
            return server, url
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the server did not answer")


def take(url: str, username: str, password: str) -> list[Path]:
    from playwright.sync_api import sync_playwright  # a dev package: needed only here

    shots: list[Path] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="Europe/Berlin")
        page = context.new_page()

        def shot(name: str) -> None:
            page.wait_for_load_state("networkidle")
            path = OUT / f"{name}.png"
            page.screenshot(path=str(path))
            shots.append(path)
            print(f"{path.relative_to(REPO)}  {page.url}")

        page.goto(f"{url}/accounts/login/")
        page.fill("#id_username", username)
        shot("login")
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{url}/")
        shot("dashboard")
        page.goto(f"{url}/events/")
        shot("explorer")
        page.fill("#f-table", "shop.orders")
        page.check("input[name=destructive]")
        page.wait_for_url(lambda u: "destructive=true" in u)
        shot("explorer-destructive-orders")
        page.fill("#f-user", "bob")
        page.locator("#f-user").press("Enter")
        page.wait_for_url(lambda u: "user=bob" in u)
        deletes = page.locator("#event-table tr", has_text="DELETE FROM orders")
        deletes.filter(has_text="no_where").first.locator("td.time a").click()
        page.wait_for_url("**/events/*/")
        shot("event-detail")
        page.get_by_role("link", name="The whole session").click()
        shot("session")
        page.goto(f"{url}/sessions/")
        shot("sessions")
        page.goto(f"{url}/tables/")
        shot("tables")
        page.goto(f"{url}/tables/shop.orders/")
        shot("table-history")
        page.goto(f"{url}/sources/")
        shot("sources")
        # The demo's silent source: delivered once, then nothing; its log was switched off.
        page.get_by_role("link", name="demo-silent general log (followed)").first.click()
        page.wait_for_url("**/sources/*/")
        shot("source-detail")
        # The digest of the destructive statements; one fingerprint's events, saved in one click.
        page.goto(f"{url}/digest/?destructive=true&sort=destructive")
        page.locator("#digest-table details summary").first.click()
        shot("digest")
        page.locator("#digest-table td.sql a").first.click()
        page.wait_for_url(lambda u: "fingerprint=" in u)
        page.get_by_role("button", name="Save search").click()
        page.wait_for_selector(".saved-searches [role=status]")
        page.locator("details.saved-list summary").click()
        shot("saved-searches")
        # Attribution provenance: bob's DELETE after logrotate's flush, known from his login in the
        # rotated file; and a connection split into two sessions by a change of user.
        page.goto(f"{url}/events/?server=demo-rotated-general-log&q=WHERE+id+%3D+7")
        page.locator("#event-table tr", has_text="DELETE FROM orders").first.locator("td.time a").click()
        page.wait_for_url("**/events/*/")
        page.locator("#attribution").scroll_into_view_if_needed()
        shot("attribution")
        page.goto(f"{url}/sessions/?server=demo-rotated-general-log&connection_id=9&user=bob")
        page.locator("td.time a").first.click()
        page.wait_for_url("**/sessions/*/")
        shot("session-change-of-user")
        # A case: bob's DELETE pinned from the explorer into a new case, and its PDF report made.
        page.goto(f"{url}/events/?user=bob&destructive=true&table=shop.orders")
        row = page.locator("#event-table tr", has_text="DELETE FROM orders").filter(has_text="no_where").first
        row.locator("details.pin-pop summary").click()
        form = row.locator("form.pin-form")
        form.wait_for()
        form.locator("select[name=case]").select_option("new")
        form.locator("input[name=title]").fill("shop.orders emptied after the restart")
        form.locator("textarea[name=note]").fill("bob's DELETE without a WHERE")
        shot("pin")
        form.get_by_role("button", name="Pin").click()
        row.locator("a.pin-mark").wait_for()
        # Several of bob's statements ticked (one, then Shift for the range), the bar ready.
        ticks = page.locator('#event-table input[form="pin-selected"]')
        ticks.first.click()
        ticks.last.click(modifiers=["Shift"])
        page.evaluate("document.getElementById('event-table').scrollIntoView({block: 'start'})")
        shot("pin-selected")
        page.locator("#select-bar").get_by_role("button", name=f"Pin {ticks.count()} selected").click()
        page.locator("#pin-selected-result p.pinned").wait_for()
        page.evaluate("document.getElementById('event-table').scrollIntoView({block: 'start'})")
        shot("pinned")
        row.locator("a.pin-mark").click()
        page.wait_for_url("**/cases/*/#evidence")
        page.fill("textarea[name=text]", "bob deleted every order right after the server restarted.")
        page.get_by_role("button", name="Add the note").click()
        page.get_by_role("button", name="PDF report").click()
        page.wait_for_url("**/cases/*/#reports")
        page.locator("#report-list").get_by_role("link", name="Download").wait_for()  # written
        page.evaluate("window.scrollTo(0, 0)")
        shot("case")
        # API tokens: a read-only SIEM token just made (its key shown this once), beside the list.
        page.goto(f"{url}/tokens/")
        page.fill("#id_name", "splunk-prod")
        page.check("#id_siem")
        page.get_by_role("button", name="Make the token").click()
        page.wait_for_selector("#new-key")
        shot("tokens")
        # The audit trail: what the screenshots' own visit left there.
        page.goto(f"{url}/audit/")
        shot("audit-trail")
        # Users: a login made for a colleague, its password shown once.
        page.goto(f"{url}/users/")
        page.fill("#id_username", "dana")
        page.select_option("#id_role", "investigator")
        page.get_by_role("button", name="Make the login").click()
        page.wait_for_selector("#new-password")
        shot("users")
        browser.close()
    return shots


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running AuditWeb; without it, one is started on DATABASE_URL")
    ap.add_argument("--username", default=USERNAME)
    ap.add_argument("--password", default=os.environ.get("AUDITWEB_PASSWORD", PASSWORD))
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium")
    if args.url:
        take(args.url.rstrip("/"), args.username, args.password)
        return 0
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("give --url of a running AuditWeb, or DATABASE_URL of a scratch database")
    server, url = start_server()
    try:
        take(url, USERNAME, PASSWORD)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
