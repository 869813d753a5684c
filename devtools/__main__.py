"""`python -m devtools demo | test [pytest arguments...]`: what `./dev` hands over to.

`test` runs pytest on the embedded servers (or those DATABASE_URL / REDIS_URL name); `demo` is
devtools.demo. Both stop every child they started, however they end.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from devtools.demo import demo
from devtools.processes import REPO, Failed, Stop, say
from devtools.services import Stack


def test(stack: Stack, args: Sequence[str]) -> int:
    stack.up()
    # pytest-django loads the settings before tests/conftest.py runs, so the throw-away key comes from here.
    stack.env.setdefault("SECRET_KEY", "tests-only-not-secret")
    rc, _ = stack.run([sys.executable, "-m", "pytest", *args], check=False)
    return rc


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print("usage: python -m devtools demo | test [pytest arguments...]", file=sys.stderr)
        return 2
    os.chdir(REPO)  # relative paths (manage.py, sample logs) name repository files
    command, args = argv[0], argv[1:]
    stack = Stack(profile=command)
    stack.install_signal_handlers()
    try:
        return demo(stack) if command == "demo" else test(stack, args)
    except Stop:
        # Ctrl-C is how a demo ends; a test run cut short did not pass.
        return 0 if command == "demo" else 128 + stack.stopping
    except Failed as error:
        say(f"error: {error}")
        return 1
    finally:
        stack.stop_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
