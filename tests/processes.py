"""Processes the tests start as a deployment would: Celery workers and gunicorn, each in a session
of its own, on a Celery queue of its own, against this test run's PostgreSQL and Redis."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from devtools.processes import stop_pid

REPO = Path(__file__).resolve().parent.parent


def worker_database_url() -> str:
    """DATABASE_URL of the database this test runs in (pytest-django's test_... copy)."""
    s = connection.settings_dict
    auth = quote(s["USER"] or "postgres") + (":" + quote(s["PASSWORD"]) if s.get("PASSWORD") else "")
    host = s.get("HOST") or s.get("OPTIONS", {}).get("host") or ""  # (a socket folder: ?host=/dir)
    if host.startswith("/"):
        return f"postgres://{auth}@/{s['NAME']}?host={quote(host)}"
    return f"postgres://{auth}@{host or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Processes:
    """The processes one test started, their logs under `tmp`; `stop_all()` leaves none behind."""

    def __init__(self, tmp: Path, queue_prefix: str = "auditweb-test") -> None:
        self.tmp = tmp
        self.queue = f"{queue_prefix}-{uuid.uuid4().hex[:12]}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.log_files: list[Path] = []

    def env(self, **extra: str) -> dict[str, str]:
        """Ours, pointed at the test database and our queue; tasks are queued, never run eagerly."""
        env = dict(os.environ)
        env.update(
            DATABASE_URL=worker_database_url(),
            CELERY_QUEUE=self.queue,
            DATABASE_CONN_MAX_AGE="0",
            SECRET_KEY=env.get("SECRET_KEY", "test-worker-key"),
        )
        env.pop("CELERY_TASK_ALWAYS_EAGER", None)
        env.update(extra)
        return env

    def launch(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = self.tmp / f"{name}.log"
        self.log_files.append(log)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], seconds: float = 20) -> None:
        """SIGTERM (a worker finishes its task), SIGKILL after `seconds`; its children go too."""
        stop_pid(proc.pid, ((signal.SIGTERM, seconds),), proc)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the process and its children (the parsing process): no chance to clean up."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for proc in self.procs:
            self.stop(proc)

    def logs(self) -> str:
        logs = dict.fromkeys(self.log_files)  # a process started again under one name: one log
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in logs)


class Workers(Processes):
    """Celery worker processes of our own (with beat unless told otherwise), polling every second."""

    def env(self, **extra: str) -> dict[str, str]:
        return super().env(
            **{"INGEST_POLL_SECONDS": "1", "AUDITWEB_LOG_ROOTS": f"/var/log,{self.tmp.resolve()}", **extra}
        )

    def start(self, *, beat: bool = True, **extra: str) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        cmd = [sys.executable, "-m", "celery", "-A", "auditweb", "worker", "--pool=solo", "--loglevel=INFO"]
        cmd += [f"--hostname=w{n}-{self.queue}@%h", "--without-gossip", "--without-mingle"]
        if beat:
            cmd += ["-B", f"--schedule={self.tmp}/beat-{n}"]
        return self.launch(f"worker-{n}", cmd, self.env(**extra))


def wait_for(
    condition: Callable[[], bool], processes: Processes, what: str = "the condition", *, seconds: float = 90
) -> None:
    """Wait until `condition()` holds; else fail with what the processes logged."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            said = processes.logs()
            raise AssertionError(f"waited {seconds} s in vain for {what}; the processes said:\n{said}")
        time.sleep(0.2)
