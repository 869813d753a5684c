"""Every shell command of the README works as written in a demo checkout.

The README's fenced `sh` blocks are cut into commands (a line, with its `\\` continuations; a
block with a loop is one command) and each is run in order, as a reader pasting them would, in
a copy of this checkout (its files as a fresh clone has them; `.venv` is linked, not built again)
while `./dev demo` runs there on its own embedded PostgreSQL and Redis. Variables a command sets
(`TOKEN=$(...)`) carry over to the next ones. The one change made to a command: the demo's port
for the documented 8000, which another program may hold here.

Every command is classified in COMMANDS: run (exit 0, saying what it should), answers (a
documented example naming a file, an id or a key of the reader's: it may exit non-zero but must
answer with the expected words, never a traceback or a configuration error), or not run, with
the reason (Docker, another server). A README command with no classification fails the fast test
below, and so does a classification no command uses.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.processes import free_port

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCUMENTED_PORT = "127.0.0.1:8000"


@dataclass(frozen=True)
class Run:
    """Exits 0 and prints `says` (when given)."""

    says: str = ""
    carry: bool = True  # its variables go on to the later commands


@dataclass(frozen=True)
class Answers:
    """An example with a placeholder of the reader's: answers `says`, any exit status."""

    says: str
    why: str


@dataclass(frozen=True)
class NotRun:
    why: str


JSON_POST = "curl -H \"Authorization: Token $TOKEN\" -H 'Content-Type: application/json' \\\n    -d "
# Keyed by the start of each command, as the README writes it (the longest matching key wins).
COMMANDS: dict[str, Run | Answers | NotRun] = {
    "./dev demo": NotRun("the test runs it first, in the copy, and the rest while it runs"),
    "./dev test": NotRun("the test suite, which this test is part of"),
    "DATABASE_URL=postgres://postgres@127.0.0.1:5432/auditweb REDIS_URL": NotRun(
        "the test suite again, on servers of the reader's"
    ),
    "set -a; . .devdata/demo/env; set +a": Run(carry=False),
    ".venv/bin/python manage.py create_login admin --reset-password": Run("New password of admin: "),
    ".venv/bin/python manage.py ingest /var/log/mysql/": Answers(
        "/var/log/mysql/general.log.1.gz: no such file", "a production server's log files"
    ),
    ".venv/bin/python manage.py ingest general.log.1 general.log mariadb-bin": Answers(
        "general.log.1: no such file", "a server's general log and binary logs, copied by the reader"
    ),
    "AUDITWEB_SOURCE_ORACLE_PASSWORD=... .venv/bin/python manage.py pull_oracle_audit": NotRun(
        "needs an Oracle server (none can run here)"
    ),
    "AUDITWEB_SOURCE_MYSQL_PASSWORD=... .venv/bin/python manage.py pull_general_log": NotRun(
        "needs the MySQL server db1.example.com and its password"
    ),
    'curl -X POST -H "Authorization: Token $TOKEN"': Answers(
        '"detail"', "event 1234 and an admin's token are the reader's: the API refuses as JSON"
    ),
    ".venv/bin/python manage.py verify_evidence": Run("events"),
    ".venv/bin/python manage.py verify_evidence --all-events": Run("events"),
    ".venv/bin/python manage.py verify_evidence --source 3 --json": Run('"intact": true'),
    ".venv/bin/python manage.py verify_evidence --case 12": Answers("no case 12", "the reader's case"),
    ".venv/bin/python manage.py verify_evidence --report report-31.json": Answers(
        "report-31.json: no such file", "a report file of the reader's"
    ),
    "TOKEN=$(.venv/bin/python manage.py create_api_token siem)": Run(),
    'curl -H "Authorization: Token $TOKEN" \\\n    \'http://127.0.0.1:8000/api/v1/events/?table=': Run(
        '"statement_type":"DELETE"'
    ),
    "curl -H \"Authorization: Token $TOKEN\" 'http://127.0.0.1:8000/api/v1/alerts/?after=1234'": Run(
        '"results"'
    ),
    'curl -H "Authorization: Token $TOKEN" -o orders.ndjson': Run(),
    ".venv/bin/python manage.py create_api_token splunk": Run(),
    "export AUDITWEB=https://auditweb.example.com TOKEN=...": NotRun(
        "points the shell at a deployment and a key of the reader's"
    ),
    'curl -fsS -H "Authorization: Token $TOKEN" "$AUDITWEB/api/v1/alerts/?page_size=1"': NotRun(
        "asks the deployment named above"
    ),
    "cursor=$(cat alerts.cursor": NotRun("polls the deployment named above, forever"),
    'curl -fsS -H "Authorization: Token $TOKEN" \\\n    "$AUDITWEB/api/v1/events/export.ndjson': NotRun(
        "the deployment named above, into an Elasticsearch ($ELASTIC)"
    ),
    "TOKEN=$(.venv/bin/python manage.py create_api_token investigator)": Run(),
    'CASE=$(curl -s -H "Authorization: Token $TOKEN"': Run(),
    JSON_POST + '\'{"event": 1234': Answers(
        '"event"', "event 1234 is the reader's: pinned (201), or refused as JSON where the demo has none"
    ),
    JSON_POST + '\'{"format": "pdf"}\'': Run(),
    "cp .env.example .env": Run(),
    'curl -fsS -o event-1234.log -H "Authorization: Token $TOKEN"': Answers(
        "404", "event 1234 is the reader's: downloaded, or not found where the demo has fewer events"
    ),
    "mkdir -p logs && cp /var/log/mysql/general.log logs/": Answers(
        "general.log", "a production server's log file, for docker compose"
    ),
    "docker compose": NotRun("needs Docker"),
    "DEBUG=false\nSECRET_KEY=...": NotRun("a production server's environment, not a command"),
}
# What no documented command may print, whatever its exit status.
BROKEN = ("Traceback (most recent call last)", "ImproperlyConfigured", "Set the environment variable")


def readme_commands(text: str) -> list[str]:
    """Each command of the README's `sh` blocks, in order."""
    commands = []
    for block in re.findall(r"^ *```(?:sh|bash|shell|console)\n(.*?)^ *```", text, re.S | re.M):
        indent = min(
            (len(line) - len(line.lstrip()) for line in block.splitlines() if line.strip()), default=0
        )
        lines = [line[indent:] for line in block.splitlines()]
        code = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if any(re.match(r"(while|for|if|until) ", line) for line in code) or all(
            re.match(r"[A-Z_]+=\S*( |$)", line) for line in code
        ):
            commands.append("\n".join(code))  # a loop, or a list of settings: one piece
            continue
        current: list[str] = []
        for line in code:
            current.append(line)
            if not line.rstrip().endswith(("\\", "|", "&&")):
                commands.append("\n".join(current))
                current = []
    return commands


def classification(command: str) -> tuple[str, Run | Answers | NotRun] | None:
    keys = [key for key in COMMANDS if command.startswith(key)]
    if not keys:
        return None
    key = max(keys, key=len)
    return key, COMMANDS[key]


def test_every_readme_command_is_classified_and_every_classification_used() -> None:
    commands = readme_commands(README.read_text())
    assert len(commands) > 20
    unclassified = [c for c in commands if classification(c) is None]
    assert not unclassified, (
        "README commands this test does not know: add each to COMMANDS (run, answers or not run "
        f"with why): {unclassified}"
    )
    used = {classification(c)[0] for c in commands}
    assert set(COMMANDS) == used, f"COMMANDS names commands the README no longer has: {set(COMMANDS) - used}"


# --- the demo checkout ---------------------------------------------------------------------------


def base_env(port: int) -> dict[str, str]:
    """A reader's fresh terminal: no DATABASE_URL, REDIS_URL or SECRET_KEY of the test run."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TMPDIR", "PYTHON")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    env["PORT"] = str(port)
    return env


@pytest.fixture(scope="module")
def demo_checkout():
    """A copy of the checkout with `./dev demo` running in it: (its folder, its port)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout, to copy the files a clone has")
    if not (REPO / ".venv" / ".requirements.lock.sha256").is_file():
        pytest.skip("needs the .venv ./dev makes (./dev setup)")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    # Not under pytest's temporary folder: as root the embedded PostgreSQL runs as another user,
    # who must pass through every folder above it, and pytest makes its own folder private again
    # (and removes old ones) whenever another session starts.
    home = Path(tempfile.mkdtemp(prefix="auditweb-readme-"))
    home.chmod(0o711)
    clone = home / "auditweb"
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():  # a file deleted but not yet committed is not in a clone
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    (clone / ".venv").symlink_to(REPO / ".venv")
    port = free_port()
    log = clone.parent / "demo.log"
    with log.open("wb") as out:
        demo = subprocess.Popen(
            ["./dev", "demo"],
            cwd=clone,
            env=base_env(port),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 900
        while "AuditWeb is running at" not in log.read_text(errors="replace"):
            if demo.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"./dev demo did not come up:\n{log.read_text(errors='replace')[-4000:]}")
            time.sleep(1)
        yield clone, port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(demo.pid, signal.SIGINT)
        try:
            demo.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.demo
def test_every_readme_command_works_as_written_in_a_demo_checkout(demo_checkout) -> None:
    clone, port = demo_checkout
    banner = (clone.parent / "demo.log").read_text()
    # The passwords are in the closing banner, after everything else the demo printed.
    closing = banner[banner.index("AuditWeb is running at") :]
    assert closing.count("Created login ") == banner.count("Created login ") == 3
    assert re.search(
        r"AuditWeb is running at .*\n    Created login admin \(admin\) with password \S+ ", closing
    )
    state = clone.parent / "state.sh"
    state.write_text("")
    failures = []
    ran = 0
    for command in readme_commands(README.read_text()):
        _, kind = classification(command)
        if isinstance(kind, NotRun):
            continue
        script = (
            f"set -a; . {state}\n{command.replace(DOCUMENTED_PORT, f'127.0.0.1:{port}')}\n"
            f"rc=$?; export -p > {state}.new; exit $rc\n"
        )
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=clone,
            env=base_env(port),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        ran += 1
        output = done.stdout + done.stderr
        wrong = [word for word in BROKEN if word in output]
        if isinstance(kind, Run) and done.returncode != 0:
            wrong.append(f"exit status {done.returncode}")
        if kind.says and kind.says not in output:
            wrong.append(f"does not say {kind.says!r}")
        if wrong:
            failures.append(f"$ {command}\n  {', '.join(wrong)}\n{output[-2000:]}")
        if not isinstance(kind, Run) or kind.carry:
            Path(f"{state}.new").replace(state)
    assert ran > 15
    assert not failures, "\n\n".join(failures)
