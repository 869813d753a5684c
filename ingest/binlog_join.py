"""The join at ingest: each stored binlog row statement tied to the stored event that made it.

A set-wise step after the commit (never per event on the hot path): `join_binlogs(server)`
takes the server's row statements not joined yet, and those left ambiguous or unlinked where
events stored since may explain them, in windows of time, loads the events of the same
seconds, and hands both to the pure `ingest.binlog.join.join`.
Whatever order the logs and the binlog came in, the last ingest of either joins them. What
it decided is stored on each `BinlogStatement`: the event with its confidence and evidence,
the candidates of an ambiguous one (or the CALLs a routine's rows may come from), the reason
for rows that nothing explains.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Hashable
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Max, Min, Q
from psycopg.types.json import Jsonb

from ingest.binlog.join import Link, LoggedStatement, RowStatement, Unlinked, join, normalise
from ingest.models import BinlogFile, BinlogJoinState, BinlogStatement, BinlogTransaction, Event
from ingest.sql import fingerprint

PAD = timedelta(seconds=2)  # the join's one second of slack, and one more for a window's edge
WINDOW_GAP = timedelta(seconds=60)  # statements closer than this are joined in one window
WINDOW_STATEMENTS = 5000  # a window is cut once it has this many (at a second's end) ...
WINDOW_SPAN = 2 * PAD  # ... and owns this many seconds (its padding then costs it at most double)
WINDOW_MOST = 50_000  # ... or it reads this many with its padding (seconds denser than that)


def join_binlogs(server: str) -> int:
    """Join the server's row statements that are new, and those left unsure (ambiguous, unlinked)
    whose moments the events stored since the last join reach. Returns how many row statements
    were (re)decided. A server without binlogs costs one indexed query.

    1. No binlog transaction of the server: nothing to do.
    2. Under the server's advisory lock (a command and a poll may join at once): the statements
       never joined, and the unsure ones within the span of the events newer than
       `BinlogJoinState.events_seen` (found by the events' id index, so a poll's few new events
       cost little, and rows no log will ever explain, such as replication, are not joined
       again and again).
    3. Those statements' moments, in windows; each window joined whole (`_join_window`).
    """
    if not BinlogTransaction.objects.filter(server=server).exists():
        return 0
    with transaction.atomic():
        with connection.cursor() as c:
            c.execute("SELECT pg_advisory_xact_lock(hashtext('auditweb binlog join ' || %s))", [server])
        state, _ = BinlogJoinState.objects.select_for_update().get_or_create(server=server)
        newest = Event.objects.aggregate(n=Max("id"))["n"] or 0
        mine = BinlogStatement.objects.filter(server=server)  # binlog_stmt_server_to_join
        todo = Q(confidence="")
        if newest > state.events_seen:
            span = Event.objects.filter(server=server, id__gt=state.events_seen, id__lte=newest).aggregate(
                lo=Min("occurred_at"), hi=Max("occurred_at")
            )
            if span["lo"] is not None:
                unsure = [BinlogStatement.Confidence.AMBIGUOUS, BinlogStatement.Confidence.UNLINKED]
                todo |= Q(confidence__in=unsure, time__range=(span["lo"] - PAD, span["hi"] + PAD))
        times = list(mine.filter(todo).order_by("time").values_list("time", flat=True))
        done = _join_times(server, times) if times else 0
        state.events_seen = max(state.events_seen, newest)
        state.save(update_fields=["events_seen"])
    return done


def _join_times(server: str, times: list[datetime]) -> int:
    files = BinlogFile.objects.filter(server=server)
    boots = sorted({f.boot_started_at for f in files if f.boot_started_at is not None})
    ids = Counter(f.server_id for f in files)
    server_id = ids.most_common(1)[0][0] if ids else None
    done: set[int] = set()  # windows overlap by their padding: a statement is counted once
    start = 0
    for i in range(1, len(times) + 1):
        # Cut only between two seconds: a window owns whole seconds, and reads PAD beyond them,
        # so the statements of one second are read by at most the windows owning the seconds
        # around it (a handful), however many share it: linear, not windows x statements.
        # Cut only once the window spans WINDOW_SPAN too: a window of one busy second read its
        # two seconds each side as well, so every statement was read (and joined) about five
        # times over where thousands share each second (issue 21's bench: 3.7 times); now at
        # most about twice where they are spread evenly (a window's own seconds at least as
        # many as its padding's). Memory: a window with its padding holds about WINDOW_MOST
        # statements at most (or one second and its padding, where those alone hold more).
        n = i - start
        full = (
            i < len(times)
            and times[i] != times[i - 1]
            and n >= WINDOW_STATEMENTS
            and (times[i - 1] - times[start] >= WINDOW_SPAN or n + _padding(times, start, i) >= WINDOW_MOST)
        )
        if i == len(times) or times[i] - times[i - 1] > WINDOW_GAP or full:
            done |= _join_window(server, times[start] - PAD, times[i - 1] + PAD, boots, server_id)
            start = i
    return len(done)


def _padding(times: list[datetime], start: int, end: int) -> int:
    """How many of `times` (sorted) a window owning times[start:end] reads beyond them: those
    within PAD before its first and after its last (bisected, not counted one by one)."""
    before = start - bisect_left(times, times[start] - PAD, hi=start)
    after = bisect_right(times, times[end - 1] + PAD, lo=end) - end
    return before + after


def _boot_of(when: datetime | None, boots: list[datetime]) -> Hashable:
    """The server boot a moment belongs to: the last start the binlog recorded at or before it
    (None before the first one it recorded). Both sides use this, so they agree."""
    if when is None:
        return None
    i = bisect_right(boots, when)
    return boots[i - 1] if i else None


def _stamp(boot: str) -> datetime | None:
    """The time in a session's boot label (ingest.normalize: `20261125T012202Z`, `before-...`)."""
    try:
        return datetime.strptime(boot.removeprefix("before-"), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _seconds(when: datetime) -> int:
    return int(when.timestamp())


_RESULTS = """
CREATE TEMP TABLE IF NOT EXISTS binlog_join_result (
    id bigint PRIMARY KEY, event_id bigint, confidence varchar(24), evidence jsonb,
    candidates bigint[], reason varchar(300)
) ON COMMIT DROP
"""
_APPLY = """
UPDATE ingest_binlogstatement s
SET event_id = r.event_id, confidence = r.confidence, evidence = r.evidence,
    candidates = r.candidates, reason = r.reason
FROM binlog_join_result r
WHERE s.id = r.id
  AND (s.event_id, s.confidence, s.evidence, s.candidates, s.reason)
      IS DISTINCT FROM (r.event_id, r.confidence, r.evidence, r.candidates, r.reason)
"""


def _join_window(
    server: str, lo: datetime, hi: datetime, boots: list[datetime], server_id: int | None
) -> set[int]:
    """Join the row statements of [lo, hi] (every one of them, sure or not: they compete for
    the same logged statements) and write the answers set-wise: COPY into a temporary table,
    then one UPDATE ... FROM that touches only the rows whose answer changed. Plain tuples,
    no model instances: linear in the window's statements."""
    # The transactions with a statement in the window (by the statements' (server, time) index,
    # binlog_stmt_server_time: a window reads its server's seconds only, however many other
    # servers stored rows of the same seconds), then all their statements.
    tx_ids = set(
        BinlogStatement.objects.filter(server=server, time__range=(lo, hi)).values_list(
            "transaction_id", flat=True
        )
    )
    statements = BinlogStatement.objects.filter(transaction_id__in=tx_ids).values_list(
        "pk", "transaction_id", "index", "time", "text", "has_text", "thread_id"
    )
    transactions = list(
        BinlogTransaction.objects.filter(pk__in=tx_ids)
        .order_by("commit_time", "file_name", "start")
        .values_list("pk", "server_id", "commit_time")
    )
    order = {pk: n for n, (pk, _, _) in enumerate(transactions)}
    by_tx = {pk: (sid, _boot_of(commit, boots)) for pk, sid, commit in transactions}
    # The row statements as the pure join's tuples, in one pass over the query's rows (not
    # kept besides: a window's memory is its RowStatements, and each text once).
    rows: list[RowStatement] = []
    first, last = lo, hi
    texts: set[str] = set()
    threads: set[int] = set()
    for pk, tx, index, when, text, has_text, thread_id in statements.iterator(chunk_size=5000):
        first, last = min(first, when), max(last, when)
        if has_text:
            texts.add(text)
        elif thread_id is not None:
            threads.add(thread_id)
        rows.append(
            RowStatement(
                key=pk,
                transaction=tx,
                order=order[tx],
                index=index,
                time=_seconds(when),
                text=text if has_text else None,
                thread_id=thread_id,
                server_id=by_tx[tx][0],
                boot=by_tx[tx][1],
            )
        )
    first, last = first - PAD, last + PAD
    # Only the events that can be candidates, not a busy server's every SELECT of those seconds:
    # the same fingerprint as a row statement's text (same text means same fingerprint: each
    # distinct text fingerprinted once), a CALL (a routine's rows), or the connection a row
    # statement without text names.
    maybe = Q(statement_type="CALL") | Q(fingerprint__in={fingerprint(t) for t in texts})
    if threads:
        maybe |= Q(connection_id__in=threads)
    events = (
        Event.objects.filter(maybe, server=server, occurred_at__range=(first, last))
        .exclude(sql="")
        .order_by("id")
        .values_list("id", "occurred_at", "connection_id", "sql", "session_id", "session__boot")
    )
    logged: list[LoggedStatement] = []
    seq: Counter[Hashable] = Counter()
    calls: dict[tuple[Hashable, int], list[int]] = {}  # (boot, second): the CALLs' event ids
    for pk, when, connection_id, sql, session_id, boot in events:
        seq[session_id] += 1
        s = LoggedStatement(
            key=pk,
            time=_seconds(when),
            connection_id=connection_id,
            sql=sql,
            seq=seq[session_id],
            boot=_boot_of(_stamp(boot) or when, boots),
        )
        logged.append(s)
        if normalise(sql)[:5].upper() == "CALL ":
            calls.setdefault((s.boot, s.time), []).append(pk)
    results = join(logged, rows, server_id=server_id)
    row_of = {b.key: b for b in rows}
    answers = []
    for r in results:
        if isinstance(r, Link) and r.statement is not None:
            answers.append((r.row_statement, r.statement, r.confidence, list(r.evidence), [], ""))
        elif isinstance(r, Link):  # ambiguous: its candidates, never one of them as fact
            ambiguous = BinlogStatement.Confidence.AMBIGUOUS
            answers.append((r.row_statement, None, ambiguous, list(r.evidence), list(r.candidates), ""))
        elif isinstance(r, Unlinked):
            row = row_of[r.row_statement]
            near = []
            if r.reason.startswith("routine"):  # the CALLs of its boot within a second, in id order
                near = sorted(pk for t in (-1, 0, 1) for pk in calls.get((row.boot, row.time + t), []))
            unlinked = BinlogStatement.Confidence.UNLINKED
            answers.append((r.row_statement, None, unlinked, [r.reason], near, r.reason[:300]))
    _write(answers)
    return set(row_of)


def _write(answers: list[tuple]) -> None:
    """The join's answers into the statements, in one UPDATE (see `_join_window`)."""
    with connection.cursor() as c:
        c.execute(_RESULTS)
        c.execute("TRUNCATE binlog_join_result")
    with connection.connection.cursor() as cur:  # the psycopg cursor: Django's has no COPY
        with cur.copy("COPY binlog_join_result FROM STDIN") as copy:
            for pk, event_id, confidence, evidence, candidates, reason in answers:
                copy.write_row((pk, event_id, confidence, Jsonb(evidence), candidates, reason))
        cur.execute(_APPLY)
