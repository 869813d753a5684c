"""AuditWeb's Django project. The Celery app (auditweb.celery) is not loaded with it: importing
it cost every `manage.py` command 0.08 CPU s (Celery, kombu, click...) before Django set up, and
the ingest command sends no task. The modules that define tasks (ingest.tasks,
investigations.tasks) import it, so whoever can send a task has it as the current app;
`celery -A auditweb` finds it as `auditweb.celery`."""

from __future__ import annotations

from typing import Any

__all__ = ["celery_app"]


def __getattr__(name: str) -> Any:
    """`auditweb.celery_app`, loaded when first asked for (the usual name of Celery's Django layout)."""
    if name == "celery_app":
        from auditweb.celery import app  # here: only a process that asks for it pays Celery's import

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
