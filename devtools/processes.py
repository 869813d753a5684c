"""Child processes of `./dev`: started in their own session, stopped in order, never left behind.

Every child gets a signal if this process dies (Linux's PR_SET_PDEATHSIG), so Ctrl-C, SIGTERM,
SIGHUP or even a SIGKILL of `./dev` leave nothing running; a pid file left by a run that died
anyway is cleaned up by the next one (docs/architecture.md, "Development tooling").
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class Stop(Exception):
    """A signal asked us to stop."""


class Failed(Exception):
    """A step failed; the message says which and where its log is."""


def say(message: str) -> None:
    print(f"[dev] {message}", flush=True)


def shown(path: Path) -> str:
    """A path as said from the repository, where it lies inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with(parent_pid: int, sig: int) -> Callable[[], None]:
    """A preexec_fn: the child gets `sig` when we die, even by SIGKILL (Linux's PR_SET_PDEATHSIG)."""

    def preexec() -> None:
        with contextlib.suppress(AttributeError):  # no prctl: not Linux; pid files cover it
            _LIBC.prctl(_PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent_pid:  # we died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0) but is gone for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def wait_gone(pid: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return True
        if proc is None and not alive(pid):
            return True
        time.sleep(0.1)
    return False


def signal_group(pid: int, sig: int) -> None:
    """Signal the process group our child leads (its own session), else the process."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop_pid(
    pid: int, signals: Sequence[tuple[int, float]], proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Send each signal in turn, waiting its time for the process to end; SIGKILL at last."""
    for sig, timeout in signals:
        if wait_gone(pid, 0, proc):
            break
        signal_group(pid, sig)
        if wait_gone(pid, timeout, proc):
            break
    else:
        signal_group(pid, signal.SIGKILL)
        wait_gone(pid, 5, proc)
    # Whatever else is left in the group (celery's pool, a reloader's child) goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# PostgreSQL: SIGINT is its "fast" shutdown, SIGQUIT the immediate one.
PG_STOP = ((signal.SIGINT, 30.0), (signal.SIGQUIT, 5.0))
# Celery: SIGTERM finishes running tasks (warm), SIGQUIT drops them (cold).
WORKER_STOP = ((signal.SIGTERM, 15.0), (signal.SIGQUIT, 5.0))
PLAIN_STOP = ((signal.SIGTERM, 10.0),)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    stop_signals: Sequence[tuple[int, float]]
    pidfile: Path | None
    log: Path | None


@dataclass
class Account:
    """The user a child runs as instead of ours (PostgreSQL's, when we are root)."""

    name: str
    uid: int
    gid: int


@dataclass
class Supervisor:
    """The children of one `./dev` run, their pid files under `home`, and the signal that stops it."""

    home: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    children: list[Child] = field(default_factory=list)
    stopping: int = 0

    # signals ---------------------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        def on_signal(signum: int, frame: object) -> None:
            if not self.stopping:
                say(f"{signal.Signals(signum).name}: stopping everything this run started...")
            self.stopping = signum

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, on_signal)

    def check(self) -> None:
        if self.stopping:
            raise Stop

    # children --------------------------------------------------------------------------------------

    def popen(
        self,
        cmd: Sequence[str | Path],
        *,
        own_session: bool,
        death_signal: int = signal.SIGTERM,
        log: Path | None = None,
        capture: bool = False,
        account: Account | None = None,
        cwd: Path = REPO,
    ) -> subprocess.Popen[bytes]:
        out = open(log, "ab") if log else None  # noqa: SIM115 - the child keeps its own copy
        try:
            return subprocess.Popen(
                [str(part) for part in cmd],
                cwd=cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out or (subprocess.PIPE if capture else None),
                stderr=subprocess.STDOUT if out else None,
                start_new_session=own_session,
                preexec_fn=_die_with(os.getpid(), death_signal),
                # Drop root's groups too: user= alone would keep gid 0.
                user=account.uid if account else None,
                group=account.gid if account else None,
                extra_groups=[] if account else None,
            )
        finally:
            if out:
                out.close()

    def spawn(
        self,
        name: str,
        cmd: Sequence[str | Path],
        *,
        marker: str,
        stop_signals: Sequence[tuple[int, float]] = PLAIN_STOP,
        log: Path | None = None,
        account: Account | None = None,
        cwd: Path = REPO,
    ) -> Child:
        """Start a long-running child in its own session, so that a terminal's Ctrl-C reaches only
        us and we stop the children in order. The pid file names a `marker` the child's command
        line contains: that is how a later run recognises it (pids get reused)."""
        proc = self.popen(
            cmd, own_session=True, death_signal=stop_signals[0][0], log=log, account=account, cwd=cwd
        )
        pidfile = self.home / f"{name}.pid"
        pidfile.write_text(f"{proc.pid}\n{marker}\n")
        child = Child(name, proc, stop_signals, pidfile, log)
        self.children.append(child)
        return child

    def run(self, cmd: Sequence[str | Path], *, check: bool = True, capture: bool = False) -> tuple[int, str]:
        """Run a command in the foreground. A terminal's Ctrl-C reaches it directly; a signal sent
        to us alone is passed on after a second."""
        proc = self.popen(cmd, own_session=False, capture=capture)
        chunks: list[bytes] = []
        signalled_at: float | None = None
        passed_on: set[int] = set()
        while True:
            try:
                out, _ = proc.communicate(timeout=0.2)
                chunks.append(out or b"")
                break
            except subprocess.TimeoutExpired:
                pass
            if self.stopping:
                signalled_at = signalled_at or time.monotonic()
                waited = time.monotonic() - signalled_at
                for after, sig in ((1, signal.SIGINT), (20, signal.SIGTERM), (30, signal.SIGKILL)):
                    if waited > after and sig not in passed_on:
                        passed_on.add(sig)
                        with contextlib.suppress(ProcessLookupError):
                            proc.send_signal(sig)
        self.check()
        if check and proc.returncode != 0:
            raise Failed(f"`{shlex.join(str(part) for part in cmd)}` exited with {proc.returncode}.")
        return proc.returncode, b"".join(chunks).decode(errors="replace")

    def wait_ready(
        self, child: Child, ready: Callable[[], bool], what: str, seconds: float, every: float = 0.2
    ) -> None:
        """Wait until `ready()`; fail, naming the child's log, if it exits or `seconds` pass first."""
        where = f"; see {child.log}" if child.log else ""
        deadline = time.monotonic() + seconds
        while not ready():
            self.check()
            if child.proc.poll() is not None:
                raise Failed(f"{child.name} exited with {child.proc.returncode}{where}")
            if time.monotonic() > deadline:
                raise Failed(f"{what} within {seconds:.0f} s{where}")
            time.sleep(every)

    def stop_all(self) -> None:
        """Stop the children, newest first: web, worker, Redis, PostgreSQL."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            # A second Ctrl-C must not cut the shutdown short.
            signal.signal(sig, lambda signum, frame: say("still stopping, please wait..."))
        while self.children:
            child = self.children.pop()
            if child.proc.poll() is None:
                say(f"stopping {child.name} (pid {child.proc.pid})")
            stop_pid(child.proc.pid, child.stop_signals, child.proc)
            if child.pidfile:
                child.pidfile.unlink(missing_ok=True)

    # stale state -----------------------------------------------------------------------------------

    def clean_stale(self, more_pidfiles: Iterable[Path] = ()) -> None:
        """Stop what a killed earlier run left running (its pid files under `home`, and
        `more_pidfiles` written by the children themselves), and drop the pid files."""
        for pidfile in [*self.home.glob("*.pid"), *more_pidfiles]:
            try:
                lines = pidfile.read_text().splitlines()
                pid = int(lines[0])
            except (OSError, ValueError, IndexError):
                pidfile.unlink(missing_ok=True)
                continue
            # The second line names what the command line shows (postmaster.pid's: `postgres -D`'s folder).
            marker = lines[1] if len(lines) > 1 else "?"
            if alive(pid) and marker in cmdline(pid):
                say(f"stopping pid {pid}, left running by an earlier run ({pidfile.name})")
                try:
                    stop_pid(pid, PG_STOP if "postgres" in cmdline(pid) else WORKER_STOP)
                except PermissionError:
                    raise Failed(f"pid {pid} ({pidfile}) belongs to another user; stop it first") from None
            pidfile.unlink(missing_ok=True)
