#!/usr/bin/env python
"""Django's command-line utility for AuditWeb."""

from __future__ import annotations

import gc
import os
import sys


def main() -> None:
    # What Django's start-up makes (the settings, the apps and their models, the command's
    # modules) lives as long as the command: the collector's passes over it while it is made are
    # wasted. None until the command is loaded (Utility below), then it is frozen out of the
    # collector's sight, as the parsing process freezes what it inherits (ingest.tail).
    gc.disable()
    # Imported here, as Django's own manage.py does: nothing is imported until the command runs.
    from auditweb.demoenv import load_demo_env

    # In a demo checkout, from another terminal: the running demo's settings (.devdata/demo/env).
    load_demo_env()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
    from django.core.management import BaseCommand, ManagementUtility  # once the settings are named

    class Utility(ManagementUtility):
        """Django's `execute_from_command_line`, collecting again once the command is loaded (every
        path that runs a command, after `django.setup()`, asks `fetch_command` for it)."""

        def fetch_command(self, subcommand: str) -> BaseCommand:
            try:
                return super().fetch_command(subcommand)
            finally:
                gc.freeze()
                gc.enable()

    try:
        Utility(sys.argv).execute()
    finally:
        gc.enable()  # (a path that loads no command: help, version, a failed set-up)


if __name__ == "__main__":
    main()
