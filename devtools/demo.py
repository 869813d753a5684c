"""`./dev demo`: AuditWeb with the sample data, a live and a silent source, and a case.

It migrates, makes one login per role, ingests the sample logs, starts the writer of the live
source (devtools.demofeed), adds the followed sources and the case (`manage.py demo_setup`), then
runs a Celery worker with beat and the web server until Ctrl-C. The story each server label tells
is in docs/architecture.md, "The demo".
"""

from __future__ import annotations

import glob
import secrets
import shlex
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from devtools.processes import REPO, WORKER_STOP, Failed, say, shown
from devtools.services import Stack

PYTHON = sys.executable
# The bundled sample logs, written by the real MariaDB (see each folder's regenerate.py), and the
# server label each is ingested under: one label per real server, each telling one story
# (README "Quick start"). Several files under one label are that server's rotated logs.
SAMPLE_LOGS = {
    # A general log rotated by logrotate, general_log switched OFF and ON again by the culprit, a
    # change of user, a refused change, restarts: attribution provenance (README "Attribution").
    "tests/fixtures/attribution_scene/*-general.log*": "demo-rotated-general-log",
    # server_audit of a similar story: every record names its account and its outcome.
    "tests/fixtures/server_audit/*.log": "demo-server-audit",
}
# Followed sources (made by `manage.py demo_setup`), each under .devdata/demo/followed/SERVER/:
# demo-silent is a copy of a real log made once, so its source delivers once and then stays
# silent (that log ends with logging switched off); demo-live is fed by devtools.demofeed with
# the records of a real mariadb-slap load for as long as the demo runs.
SILENT_SAMPLE = "tests/fixtures/genlog/mariadb-10.11.19-scenario.log"
LIVE_SAMPLE = "tests/fixtures/genlog/mariadb-10.11.19-slap.log"


def oldest_first(paths: list[str]) -> list[str]:
    """Log files in the order they were written: `x.log.2`, `x.log.1`, then `x.log`."""

    def age(path: str) -> tuple[str, int]:
        base, _, number = path.rpartition(".")
        return (base, -int(number)) if number.isdigit() else (path, 0)

    return sorted(paths, key=age)


def sample_logs() -> list[tuple[str, str, list[str]]]:
    """The demo's sample logs as it ingests them: (pattern, server label, files oldest first) for
    each of SAMPLE_LOGS; tests and the screenshots load the same files."""
    return [
        (pattern, server, oldest_first([str(REPO / p) for p in glob.glob(pattern, root_dir=REPO)]))
        for pattern, server in SAMPLE_LOGS.items()
    ]


def seed_silent(followed: Path) -> Path:
    """demo-silent's followed log, copied once: its source delivers it, then nothing more."""
    silent = followed / "demo-silent" / "general.log"
    if not silent.exists():
        silent.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / SILENT_SAMPLE, silent)
    return silent


# The demo's logins: the superuser admin, and one login for each lesser role.
DEMO_LOGINS = (
    ("admin", ["--superuser"]),
    ("investigator", ["--role", "investigator"]),
    ("viewer", ["--role", "viewer"]),
)


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, ValueError):
        return None


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        # As runserver does: a port some earlier connection left in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def demo_env(stack: Stack) -> dict[str, str]:
    """What every demo process and a second terminal need: the servers, the key, DEBUG, and the
    folder of the followed logs among the log roots. Written to .devdata/demo/env (mode 0600)."""
    env = stack.env
    env.setdefault("DEBUG", "true")
    if not env.get("SECRET_KEY"):
        # One key per checkout, kept, so that logins survive a restart of the demo.
        key_file = stack.home / "secret_key"
        if not key_file.exists():
            key_file.write_text(secrets.token_urlsafe(50))
            key_file.chmod(0o600)
        env["SECRET_KEY"] = key_file.read_text().strip()
    followed = str(stack.home / "followed")
    roots = [root for root in (env.get("AUDITWEB_LOG_ROOTS") or "/var/log").split(",") if root]
    env["AUDITWEB_LOG_ROOTS"] = ",".join([*roots, followed] if followed not in roots else roots)
    names = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "AUDITWEB_LOG_ROOTS")
    path = stack.home / "env"
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text("".join(f"{name}={shlex.quote(env[name])}\n" for name in names))
    return {name: env[name] for name in names}


def password_lines(outputs: Sequence[str]) -> list[str]:
    """The banner's word on the logins: each new one's password, or how to reset one."""
    made = [line.strip() for out in outputs for line in out.splitlines() if line.startswith("Created login")]
    reset = ".venv/bin/python manage.py create_login admin --reset-password"
    if len(made) == len(outputs):
        return [*made, f"Lost one? {reset} (or investigator, viewer) prints a new one."]
    kept = "The other logins keep" if made else "admin, investigator and viewer keep"
    return [
        *made,
        f"{kept} the passwords printed when they were made.",
        f"Forgot one? {reset} (or investigator, viewer) prints a new one.",
    ]


def demo(stack: Stack) -> int:
    port = int(stack.env.get("PORT") or 8000)
    if not port_free(port):
        raise Failed(f"port {port} is in use; choose another: PORT=8001 ./dev demo")
    started = time.monotonic()
    stack.up()
    demo_env(stack)
    stack.env["PYTHONUNBUFFERED"] = "1"
    manage: list[str | Path] = [PYTHON, "manage.py"]

    say("migrating the database")
    stack.run([*manage, "migrate", "--no-input"])
    # One login per role, so each role's view of AuditWeb can be tried; passwords go in the banner.
    logins = []
    for username, role in DEMO_LOGINS:
        _, login = stack.run([*manage, "create_login", username, *role], capture=True)
        logins.append(login)
    for pattern, server, samples in sample_logs():
        if samples:
            say(f"ingesting {len(samples)} sample log(s) ({pattern}) as server {server!r}")
            stack.run([*manage, "ingest", *samples, "--server", server])
        else:
            say(f"no sample logs match {pattern}")
    followed = stack.home / "followed"
    seed_silent(followed)
    live = followed / "demo-live" / "general.log"
    stack.spawn(
        "feeder",
        [PYTHON, "-m", "devtools.demofeed", LIVE_SAMPLE, live],
        marker=f"devtools.demofeed {LIVE_SAMPLE} {live}",
        log=stack.logs / "feeder.log",
    )
    say("adding the followed sources and the demo case (its report is written by the worker)")
    stack.run([*manage, "demo_setup", "--followed", followed])

    schedule = stack.home / "celerybeat-schedule"
    stack.spawn(
        "worker",
        [
            *(PYTHON, "-m", "celery", "-A", "auditweb", "worker", "--beat", f"--schedule={schedule}"),
            *("--concurrency=2", "--loglevel=INFO"),
        ],
        marker=f"--schedule={schedule}",
        stop_signals=WORKER_STOP,
        log=stack.logs / "worker.log",
    )
    # --noreload: one process; the autoreloader's child would outlive a killed parent.
    address = f"127.0.0.1:{port}"
    web = stack.spawn(
        "web", [*manage, "runserver", "--noreload", address], marker=f"runserver --noreload {address}"
    )
    url = f"http://{address}/"
    login = url + "accounts/login/"
    stack.wait_ready(
        web, lambda: http_status(login) == 200, f"the web server did not answer on {login}", 60, 0.3
    )

    lines = [
        f"AuditWeb is running at {url}  (up in {time.monotonic() - started:.0f} s)",
        *password_lines(logins),
        f"In another terminal, .venv/bin/python manage.py finds this demo ({shown(stack.home / 'env')}).",
        f"Logs: {shown(stack.logs)}. Ctrl-C stops everything.",
    ]
    print("\n" + "\n".join(f"    {line}" for line in lines) + "\n", flush=True)
    while True:
        stack.check()
        for child in stack.children:
            if child.proc.poll() is not None:
                where = f"; see {child.log}" if child.log else ""
                raise Failed(f"{child.name} exited unexpectedly with {child.proc.returncode}{where}")
        time.sleep(0.5)
