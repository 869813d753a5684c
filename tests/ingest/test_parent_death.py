"""The parsing process dies with the process that forked it (issue 18, item 11).

`manage.py ingest` is started for real on a log whose parsing keeps its child busy, then
killed with SIGKILL (as a Celery hard time limit kills a worker): the forked parsing
process must be gone at once, not go on at full CPU with no parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import worker_database_url

REPO = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.django_db(transaction=True)


def busy_log(path: Path, statements: int) -> None:
    """A general log of distinct joins: each one costs the classifier a parse (about 0.5 ms)."""
    with path.open("w") as f:
        f.write("2024-05-01T10:00:00.000000Z\t    7 Connect\troot@localhost on shop using Socket\n")
        for i in range(statements):
            f.write(
                f"2024-05-01T10:00:01.000000Z\t    7 Query\tSELECT a.x{i}, b.y FROM t{i} a JOIN u{i} b"
                f" ON a.id = b.id{i} WHERE a.z{i} IN (SELECT q FROM r{i}) ORDER BY a.x{i}\n"
            )


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with open(task / "children") as f:
            found += [int(c) for c in f.read().split()]
    return found


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a reaper)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_killing_ingest_kills_its_parsing_process(tmp_path: Path) -> None:
    log = tmp_path / "busy.log"
    busy_log(log, 200_000)  # about 100 s of parsing: far longer than this test waits
    env = dict(os.environ)
    env.update(
        DATABASE_URL=worker_database_url(),
        INGEST_PARALLEL="true",
        # One batch for the whole file: the child writes nothing to its pipe while we look,
        # so only its parent's death can end it early.
        INGEST_BATCH_SIZE="100000000",
    )
    cmd = [sys.executable, "manage.py", "ingest", str(log), "--server", "parent-death"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = None
    try:
        deadline = time.monotonic() + 120
        while child is None and time.monotonic() < deadline and proc.poll() is None:
            kids = children_of(proc.pid)
            child = kids[0] if kids else None
            time.sleep(0.05)
        assert child is not None, "the ingest command forked no parsing process"
        time.sleep(1)  # well into the file
        assert alive(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child), "the parsing process outlived the killed ingest command"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if child is not None and alive(child):
            os.kill(child, signal.SIGKILL)
