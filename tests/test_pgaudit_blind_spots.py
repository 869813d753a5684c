"""Where pgAudit's blind spots end, from the real logs of a private PostgreSQL 15 with pgAudit.

A cluster (tests/fixtures/pgaudit_scene/regenerate.py's, with a log_line_prefix of our own that
AuditWeb does not know without being told, and pgaudit.log set by ALTER SYSTEM rather than in
postgresql.conf) plays each way of switching pgAudit off and back on, with a DELETE of a
numbered row while it is off and after it is back:

1. a session: `SET pgaudit.log = 'none'` (never logged), a DELETE, `SET pgaudit.log` back (logged);
2. a session: `SET pgaudit.log = 'misc_set'` (logged: no writes), a DELETE, back to writes;
3. `ALTER SYSTEM RESET pgaudit.log` and a reload: postgresql.conf does not set it, so the server
   logs `parameter "pgaudit.log" removed from configuration file, reset to default`, and the
   default is `none`; a DELETE; `ALTER SYSTEM SET` back and a reload (`changed to ...`);
4. `ALTER SYSTEM SET pgaudit.log = 'none'` and a reload; a restart still with `none`; a DELETE;
   `ALTER SYSTEM SET` back without a reload, and a restart (no `changed to` line: the start is
   what ends it);
5. `DROP EXTENSION pgaudit`, a DELETE (still audited: the library stays loaded), `CREATE
   EXTENSION pgaudit`, a DELETE.

Each layout (csvlog, and stderr read with `manage.py ingest --log-line-prefix`) is ingested and
asked: which DELETEs the log shows, and each logging_off gap's start and end, against the times
of the very records that open and close it. Meanwhile a followed source polls the live cluster's
csvlog files, through two `pg_rotate_logfile()` rotations and the restarts' new files: it must
store exactly what the straight ingest stores, each event once, the gaps alike.
"""

from __future__ import annotations

import io
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from ingest.follow import ingest_source
from ingest.models import Event, Gap, IngestRun, ParseProblem, Source
from tests.fixtures.pgaudit_scene.regenerate import BINDIR, Cluster, cluster, missing

PREFIX = "%m|%u|%d|%c|%p|%a| "  # none of KNOWN_PREFIXES: a stderr log in it must be told it
LOGGING = "write, ddl, role, misc_set"
CONFIG: dict[str, str | None] = {
    "log_destination": "'stderr,csvlog'",
    "log_line_prefix": f"'{PREFIX}'",
    "pgaudit.log": None,  # set by ALTER SYSTEM (postgresql.auto.conf) once the cluster runs
}
# Rows deleted while pgAudit logs (the log shows them) and while it is off (it does not).
AUDITED = {1, 3, 5, 7, 9, 11, 12}
UNAUDITED = {2, 4, 6, 8}
SET_BACK = f"SET pgaudit.log = '{LOGGING}'"

pytestmark = pytest.mark.skipif(missing() is not None, reason=f"cannot start a pgAudit cluster: {missing()}")


def _reload(c: Cluster) -> None:
    with c.connect(application="admin") as conn:
        conn.execute("SELECT pg_reload_conf()")
    time.sleep(0.6)  # the postmaster reads the files and logs the changes asynchronously


def _restart(c: Cluster) -> None:
    c.run(BINDIR / "pg_ctl", "-D", c.data, "-m", "fast", "-w", "restart", "-l", c.folder / "server.out")


def _admin(c: Cluster, *statements: str) -> None:
    with c.connect(application="admin") as conn:
        for sql in statements:
            conn.execute(sql)


def _delete(c: Cluster, row: int, application: str = "app") -> None:
    with c.connect(application=application) as conn:
        conn.execute(f"DELETE FROM shop.items WHERE id = {row}")


def play(c: Cluster, poll: Callable[[], object] = lambda: None) -> None:
    """The story of the module docstring, each statement in its own session unless said;
    `poll` is called now and then (a followed source reads what the server wrote so far), and
    the logs are rotated twice by `pg_rotate_logfile()` besides the restarts' new files."""
    poll()
    _admin(c, f"ALTER SYSTEM SET pgaudit.log = '{LOGGING}'")
    _reload(c)
    _admin(
        c,
        "CREATE EXTENSION pgaudit",
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.items (id int PRIMARY KEY)",
        "INSERT INTO shop.items SELECT generate_series(1, 20)",
    )
    # 1. SET 'none' and back, in one session.
    with c.connect(application="session-off") as conn:
        conn.execute("DELETE FROM shop.items WHERE id = 1")
        conn.execute("SET pgaudit.log = 'none'")
        conn.execute("DELETE FROM shop.items WHERE id = 2")
        poll()  # (a read in the middle of a session's blind spot)
        conn.execute(f"SET pgaudit.log = '{LOGGING}'")
        conn.execute("DELETE FROM shop.items WHERE id = 3")
    time.sleep(1.1)  # (a rotation starts a file named by the second)
    _admin(c, "SELECT pg_rotate_logfile()")
    poll()
    # 2. SET to a value that logs no writes (itself logged, by misc_set), and back.
    with c.connect(application="session-nowrite") as conn:
        conn.execute("SET pgaudit.log = 'misc_set'")
        conn.execute("DELETE FROM shop.items WHERE id = 4")
        time.sleep(1.1)  # (a rotation starts a file named by the second)
        conn.execute("SELECT pg_rotate_logfile()")
        poll()  # (the session's blind spot open across the rotation)
        conn.execute(f"SET pgaudit.log = '{LOGGING}'")
        conn.execute("DELETE FROM shop.items WHERE id = 5")
    # 3. ALTER SYSTEM RESET: removed from the configuration, back to pgAudit's default, none.
    _admin(c, "ALTER SYSTEM RESET pgaudit.log")
    _reload(c)
    poll()
    _delete(c, 6)
    _admin(c, f"ALTER SYSTEM SET pgaudit.log = '{LOGGING}'")
    _reload(c)
    _delete(c, 7)
    # 4. Off by a reload, still off after a restart, back on by a restart alone.
    _admin(c, "ALTER SYSTEM SET pgaudit.log = 'none'")
    _reload(c)
    poll()  # (the server's blind spot stored open, closed by a later read)
    _restart(c)
    _delete(c, 8)
    _admin(c, f"ALTER SYSTEM SET pgaudit.log = '{LOGGING}'")
    _restart(c)
    _delete(c, 9)
    # (Maybe right after the start line: the logging collector writes the lines after it when
    # it gets to them. A read that ends there ends before the start line, read again next time.)
    poll()
    # 5. The extension dropped and created again: the hooks of the loaded library go on.
    _admin(c, "DROP EXTENSION pgaudit")
    _delete(c, 11)
    _admin(c, "CREATE EXTENSION pgaudit")
    _delete(c, 12)
    poll()


LAYOUTS = ("csv", "log")
FOLLOWED = "blind-followed"


def server_of(layout: str) -> str:
    return f"blind-{layout}"


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, django_db_setup: None, django_db_blocker: Any
) -> Iterator[dict[str, list[Path]]]:
    """The story played; meanwhile a followed source over the live cluster's csvlog files
    (`postgresql-*.csv`) polled as it goes. Then both layouts' files ingested: the csvlog as
    `--format auto` finds it, the stderr log told its prefix (`--log-line-prefix`, nothing else:
    the format follows from it)."""
    folder = tmp_path_factory.mktemp("pgaudit-blind-spots")
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)
        with cluster(folder, CONFIG) as c:
            source = Source.objects.create(
                name="followed cluster",
                kind=Source.Kind.FILE,
                path=str(c.data / "log" / "postgresql-*.csv"),
                server=FOLLOWED,
                format="auto",
            )
            # (the cluster's folder is a temporary one of its own: a root the source may read in)
            roots = [*settings.LOG_ROOTS, c.folder.resolve()]
            with override_settings(INGEST_SETTLE_SECONDS=3600, LOG_ROOTS=roots):  # never quiet while it runs
                play(c, lambda: ingest_source(source.pk))
            with override_settings(INGEST_SETTLE_SECONDS=0, LOG_ROOTS=roots):  # quiet now: the last is whole
                ingest_source(source.pk)
                ingest_source(source.pk)
        logs = {"csv": sorted(folder.glob("*.csv")), "log": sorted(folder.glob("*.log"))}
        for layout, options in (("csv", []), ("log", ["--log-line-prefix", PREFIX])):
            out = io.StringIO()
            paths = [str(p) for p in logs[layout]]
            call_command("ingest", *paths, "--server", server_of(layout), *options, stdout=out)
            assert ", 0 problems," in out.getvalue(), out.getvalue()
        yield logs
        call_command("flush", interactive=False, verbosity=0)


def deleted_rows(layout: str) -> set[int]:
    texts = Event.objects.filter(server=server_of(layout), sql__startswith="DELETE FROM shop.items")
    return {int(sql.rsplit("= ", 1)[1]) for sql in texts.values_list("sql", flat=True)}


def one(layout: str, **where: Any) -> Event:
    return Event.objects.get(server=server_of(layout), **where)


def at(layout: str, **where: Any) -> Any:
    return one(layout, **where).occurred_at


pytestmark = [pytestmark, pytest.mark.django_db]
per_layout = pytest.mark.parametrize("layout", LAYOUTS)


@per_layout
def test_the_log_shows_each_delete_made_while_pgaudit_logged_and_no_other(scene: Any, layout: str) -> None:
    assert deleted_rows(layout) == AUDITED
    assert not deleted_rows(layout) & UNAUDITED


@per_layout
def test_each_blind_spot_ends_where_logging_came_back(scene: Any, layout: str) -> None:
    """The four blind spots, each from the record that opens it to the one that closes it."""
    first_delete = one(layout, sql="DELETE FROM shop.items WHERE id = 1")
    set_back = one(layout, sql=SET_BACK, connection_id=first_delete.connection_id)
    quiet = one(layout, sql="SET pgaudit.log = 'misc_set'")
    quiet_back = one(layout, sql=SET_BACK, connection_id=quiet.connection_id)
    removed = at(layout, command="Config", sql__contains="removed from configuration file")
    changes = list(
        Event.objects.filter(server=server_of(layout), command="Config")
        .order_by("occurred_at")
        .values_list("sql", "occurred_at")
    )
    back_on = next(t for sql, t in changes if t > removed and sql.endswith(f'"{LOGGING}"'))
    off = at(layout, command="Config", sql='parameter "pgaudit.log" changed to "none"')
    ninth = at(layout, sql="DELETE FROM shop.items WHERE id = 9")
    starts = Event.objects.filter(server=server_of(layout), command="Server start")
    restarted = starts.filter(occurred_at__lt=ninth).order_by("-occurred_at")[0].occurred_at
    gaps = list(
        Gap.objects.filter(server=server_of(layout), reason="logging_off")
        .order_by("started_at")
        .values_list("started_at", "ended_at", "detail")
    )
    assert [(g[0], g[1]) for g in gaps] == [
        (first_delete.occurred_at, set_back.occurred_at),  # 1. SET 'none' ... SET back (may)
        (quiet.occurred_at, quiet_back.occurred_at),  # 2. SET 'misc_set' ... SET back
        (removed, back_on),  # 3. ALTER SYSTEM RESET: to the default, none
        (off, restarted),  # 4. none across a restart, back by the next restart
    ]
    assert "may be missing" in gaps[0][2]
    assert "'misc_set' (no writes)" in gaps[1][2]
    assert "started again" in gaps[3][2]
    assert starts.count() == 3  # the cluster's first start and the two restarts


@per_layout
def test_sessions_that_deleted_unseen_fall_in_a_blind_spot(scene: Any, layout: str) -> None:
    """The sessions whose DELETE pgAudit did not record (rows 6 and 8: their own sessions)
    logged in and out; each lies inside a gap."""
    apps = Event.objects.filter(server=server_of(layout), command="Connect", session__program="app")
    deleting = set(
        Event.objects.filter(server=server_of(layout), sql__startswith="DELETE").values_list(
            "connection_id", flat=True
        )
    )
    unseen = [e.occurred_at for e in apps if e.connection_id not in deleting]
    assert len(unseen) == 2
    gaps = Gap.objects.filter(server=server_of(layout), reason="logging_off")
    for when in unseen:
        assert gaps.filter(started_at__lte=when, ended_at__gte=when).count() == 1, when


@per_layout
def test_the_extension_dropped_is_flagged_and_opens_no_gap(scene: Any, layout: str) -> None:
    drop = one(layout, sql="DROP EXTENSION pgaudit")
    assert "anti_forensic" in drop.flags
    assert not Gap.objects.filter(
        server=server_of(layout), reason="logging_off", ended_at__gt=drop.occurred_at
    )
    assert {11, 12} <= deleted_rows(layout)  # audited with the extension gone, and after
    configs = Event.objects.filter(server=server_of(layout), command="Config")
    assert configs.count() == 4 and all("anti_forensic" in c.flags for c in configs)


@per_layout
def test_both_layouts_tell_the_same_statements(scene: Any, layout: str) -> None:
    def told(server: str) -> list[tuple[Any, ...]]:
        return list(
            Event.objects.filter(server=server)
            .exclude(command="Server start")
            .order_by("occurred_at", "connection_id", "command", "sql")
            .values_list("occurred_at", "command", "user", "connection_id", "sql", "status")
        )

    assert told(server_of(layout)) == told(server_of("csv"))
    prefixes = Source.objects.filter(server=server_of("log")).values_list("log_line_prefix", flat=True)
    assert set(prefixes) == {PREFIX}


def test_a_stderr_log_in_an_unknown_prefix_says_what_to_give(scene: dict[str, list[Path]]) -> None:
    out = io.StringIO()
    call_command(
        "ingest", str(scene["log"][0]), "--server", "untold", "--format", "pgaudit-stderr", stdout=out
    )
    assert ", 1 problems," in out.getvalue()  # one for the file, naming what to give
    problem = ParseProblem.objects.get(source_file__source__server="untold")
    assert "give it as the source's log_line_prefix" in problem.reason
    assert not Event.objects.filter(server="untold", command="Query").exists()
    with pytest.raises(CommandError, match=r"names no %u \(user\), no %d \(database\), no %c \(session id\)"):
        call_command("ingest", str(scene["log"][0]), "--server", "untold", "--log-line-prefix", "%m [%p] ")


def _told(server: str) -> Counter[tuple[Any, ...]]:
    rows = Event.objects.filter(server=server).values_list(
        "occurred_at", "connection_id", "command", "user", "sql", "statement_type", "destructive", "flags"
    )
    return Counter((*r[:7], tuple(sorted(r[7]))) for r in rows)


def test_a_followed_source_of_the_live_cluster_stores_each_event_once(scene: Any) -> None:
    """Polled while the server wrote, through two pg_rotate_logfile() rotations and the two
    restarts' new files: exactly what the straight ingest of the files stores, gaps alike."""
    followed = Source.objects.get(server=FOLLOWED)
    assert followed.last_error == "" and followed.enabled
    assert _told(FOLLOWED) == _told(server_of("csv"))
    assert sum(_told(FOLLOWED).values()) > 50
    files = Source.objects.get(server=FOLLOWED).files.count()
    assert files == len(scene["csv"]) >= 4  # the first, two rotations, the restarts' (one or two)
    assert not ParseProblem.objects.filter(source_file__source__server=FOLLOWED).exists()
    assert (
        not IngestRun.objects.filter(source__server=FOLLOWED).exclude(status=IngestRun.Status.DONE).exists()
    )

    def gaps(server: str) -> list[tuple[Any, ...]]:
        rows = Gap.objects.filter(server=server).order_by("started_at", "reason")
        return list(rows.values_list("reason", "started_at", "ended_at"))

    assert gaps(FOLLOWED) == gaps(server_of("csv"))


if __name__ == "__main__":  # play it into a folder to read the logs
    import sys

    with cluster(Path(sys.argv[1]), CONFIG) as c:
        play(c)
