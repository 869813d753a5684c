#!/usr/bin/env python
"""Django's command-line utility for AuditWeb."""

from __future__ import annotations

import os
import sys


def main() -> None:
    # Imported here, as Django's own manage.py does: nothing is imported until the command runs.
    from auditweb.demoenv import load_demo_env

    # In a demo checkout, from another terminal: the running demo's settings (.devdata/demo/env).
    load_demo_env()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    from django.core.management import execute_from_command_line  # once the settings are named

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
