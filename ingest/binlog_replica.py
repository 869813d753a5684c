"""A binlog-replica source: the server's binary log pulled as a replica pulls it, into a spool of
binlog files (ingest.binlog.spool), which is then stored as a followed binlog source is
(ingest.binlog_follow). One poll: connect, take what the server has (bounded in bytes and
seconds, never waiting for more), disconnect, store.

The account needs REPLICATION SLAVE (the dump) and BINLOG MONITOR on MariaDB 10.5+ or
REPLICATION CLIENT elsewhere (SHOW BINARY LOGS, for the first pull and after a reset); its
password comes from the worker's environment as for a live general_log table (ingest.mysql_table).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings

from ingest.binlog.spool import PullState, ResetSeen, SpoolError, pull
from ingest.binlog_follow import follow_binlogs
from ingest.models import IngestRun, Source
from ingest.mysql_table import connect, source_password
from ingest.textsafe import storable

# The replica's own server id: unique among the server's replicas, and far from the ids people
# give their servers (1, 2, 100...). One per source.
SERVER_ID_BASE = 3_000_000_000
_NO_SUCH_POSITION = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG: purged, or beyond the file's end


def spool_of(source: Source) -> Path:
    """The source's spool folder (one generation folder per sequence of the server's files)."""
    return Path(settings.BINLOG_SPOOL_DIR) / f"source-{source.pk}"


def replica_server_id(source: Source) -> int:
    return SERVER_ID_BASE + source.pk


def _first_file(conn: Any) -> str:
    cur = conn.cursor()
    try:
        cur.execute("SHOW BINARY LOGS")
        rows = cur.fetchall()
    finally:
        cur.close()
    if not rows:
        raise SpoolError("the server has no binary log (log_bin is OFF)")
    return str(rows[0][0])


def _pull(conn: Any, spool: Path, source: Source) -> None:
    pull(
        conn,
        spool,
        server_id=replica_server_id(source),
        max_bytes=settings.BINLOG_POLL_BYTES,
        max_seconds=settings.BINLOG_POLL_SECONDS,
        max_event_bytes=settings.BINLOG_MAX_EVENT_BYTES,
        first_file=lambda: _first_file(conn),
    )


def _start_again(spool: Path, why: str) -> None:
    """The spool's place is gone from the server (purged, RESET MASTER): the next pull starts
    from the server's oldest file in a new generation folder, and the gap is stated."""
    state = PullState.load(spool)
    note = (
        f"the pull could not go on after {state.file or 'the start'} at byte {state.position}: {why}; "
        "what the server wrote after that and no longer has is not stored"
    )
    PullState(generation=state.generation + 1, notes=[*state.notes, note]).save(spool)


def pull_binlogs(source: Source, run: IngestRun | None) -> IngestRun:
    """One poll of a binlog-replica source: pull into the spool, then store the spool. Every
    poll has a run (as a table's pull has): failed, with the reason, when the pull failed."""
    spool = spool_of(source)
    error = ""
    run = run or IngestRun.objects.create(source=source, bytes_total=0)
    try:
        password = source_password(source.password_env, os.environ)
        conn = connect(source.dsn, password, read_timeout=max(5, settings.BINLOG_POLL_SECONDS))
    except Exception as e:  # refused, unknown host, bad password: the source's health says so
        message = storable(f"cannot connect to {source.dsn}: {e}")[:2000]
        Source.objects.filter(pk=source.pk).update(last_error=message)
        run.begin(0)
        run.fail(message)
        return run
    try:
        for attempt in (1, 2):
            try:
                _pull(conn, spool, source)
                break
            except ResetSeen as e:
                _start_again(spool, str(e))
            except Exception as e:
                code = e.args[0] if e.args and isinstance(e.args[0], int) else None
                if code != _NO_SUCH_POSITION or attempt == 2:
                    raise
                why = f"the server says: {e.args[-1]} (PURGE BINARY LOGS, or RESET MASTER)"
                _start_again(spool, why)
            conn.close()
            conn = connect(source.dsn, password, read_timeout=max(5, settings.BINLOG_POLL_SECONDS))
    except Exception as e:  # no grant, the server gone mid-pull, a stream out of step
        error = storable(f"pulling the binary log from {source.dsn}: {e}")[:2000]
    finally:
        conn.close()
    state = PullState.load(spool)
    notes = list(state.notes)
    roots = [Path(settings.BINLOG_SPOOL_DIR).resolve()]
    run = follow_binlogs(source, run, pattern=str(spool / "g*" / "*"), notes=notes, roots=roots)
    if len(notes) < len(state.notes):  # stated on a file: not again
        PullState(state.generation, state.file, state.position, state.gtid, notes).save(spool)
    assert run is not None  # given a run, follow_binlogs ends it and hands it back
    if error:
        Source.objects.filter(pk=source.pk).update(last_error=error)
        # What was pulled before the error is stored; the run says the pull failed all the same.
        IngestRun.objects.filter(pk=run.pk).update(status=IngestRun.Status.FAILED, error=error)
        run.refresh_from_db()
    return run
