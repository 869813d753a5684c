"""What `manage.py` loads before a command runs (issue 22, item 6: the ingest command does not pay
for what it does not use), and that what it no longer loads is still there for whoever needs it.

Each check runs in a fresh interpreter: this test process has long loaded everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run(code: str) -> object:
    """Run `code` after Django's set-up in a new interpreter of this checkout; its last line of
    output, as JSON."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="auditweb.settings")
    head = "import json, sys\nimport django\ndjango.setup()\n"
    done = subprocess.run(
        [sys.executable, "-c", head + code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_ingest_command_and_its_read_load_no_celery() -> None:
    loaded = _run(
        "import ingest.management.commands.ingest, ingest.pipeline, ingest.tail, ingest.store\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('celery', 'kombu'))))"
    )
    assert loaded == []


def test_a_task_is_sent_with_the_auditweb_app_and_its_settings() -> None:
    # Django's set-up no longer loads the Celery app: the tasks modules do. Without it a task's
    # .delay() would go through Celery's default app (amqp://localhost), not REDIS_URL's broker.
    for module, task in [
        ("investigations.tasks", "refresh_tables_seen"),
        ("ingest.tasks", "ingest_source_task"),
    ]:
        found = _run(
            f"from {module} import {task} as task\n"
            "from celery import current_app\n"
            "from django.conf import settings\n"
            "print(json.dumps([task.app.main, current_app.main, task.app.conf.broker_url == "
            "settings.CELERY_BROKER_URL, task.app.conf.task_default_queue]))"
        )
        assert found == ["auditweb", "auditweb", True, os.environ.get("CELERY_QUEUE", "celery")], module


def test_celery_finds_the_app_as_the_worker_and_beat_name_it() -> None:
    # `celery -A auditweb worker` (docker-compose.yml, tests/processes.py)
    found = _run(
        "from celery.app.utils import find_app\n"
        "import auditweb\n"
        "print(json.dumps([find_app('auditweb').main, auditweb.celery_app.main]))"
    )
    assert found == ["auditweb", "auditweb"]


def test_a_command_runs_with_the_collector_on_and_the_start_up_frozen() -> None:
    # manage.py collects nothing while Django starts and the command loads, then freezes what
    # that made: the command itself must run with the collector on (or it would keep its cycles).
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="auditweb.settings")
    code = "import gc, json; print(json.dumps([gc.isenabled(), gc.get_freeze_count() > 10_000]))"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, True]
