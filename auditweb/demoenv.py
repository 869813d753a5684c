"""In a demo checkout, `manage.py` finds the running demo by itself.

`./dev demo` writes what its processes run with (servers, key, DEBUG, log roots) to
`.devdata/demo/env`. When a command is run from another terminal with neither DATABASE_URL nor
SECRET_KEY set, that is what it means: take those settings. An environment that names either
(a server, CI, the demo's own children) is left exactly as it is. No Django here: this runs
before the settings are read.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import MutableMapping
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parent.parent


def env_file(environ: MutableMapping[str, str]) -> Path:
    devdata = Path(environ.get("AUDITWEB_DEVDATA") or REPO / ".devdata")
    return devdata / "demo" / "env"


def read_env(path: Path) -> dict[str, str]:
    """NAME=value lines, each value quoted as the shell would read it (shlex.quote wrote them)."""
    values = {}
    for line in path.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.isidentifier():
            words = shlex.split(value)
            values[name] = words[0] if words else ""
    return values


def demo_running(database_url: str) -> bool:
    """Whether the embedded PostgreSQL the URL names has its socket (it has one only while the
    demo runs); a URL naming a TCP server is taken to be up."""
    hosts = parse_qs(urlsplit(database_url).query).get("host")
    return not hosts or Path(hosts[0], ".s.PGSQL.5432").exists()


def load_demo_env(environ: MutableMapping[str, str] = os.environ) -> Path | None:
    """Take the demo's settings when the environment gives none; the file read, or None."""
    if environ.get("DATABASE_URL") or environ.get("SECRET_KEY"):
        return None
    path = env_file(environ)
    if not path.is_file():
        return None
    for name, value in read_env(path).items():
        environ.setdefault(name, value)
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    print(f"[manage.py] using the demo's settings from {shown}", file=sys.stderr)
    if not demo_running(environ.get("DATABASE_URL", "")):
        print("[manage.py] the demo is not running: start ./dev demo first", file=sys.stderr)
    return path
