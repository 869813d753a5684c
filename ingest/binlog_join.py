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

from bisect import bisect_right
from collections import Counter
from collections.abc import Hashable
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Max, Min, Q

from ingest.binlog.join import Link, LoggedStatement, RowStatement, Unlinked, join, normalise
from ingest.models import BinlogFile, BinlogJoinState, BinlogStatement, BinlogTransaction, Event
from ingest.sql import fingerprint

PAD = timedelta(seconds=2)  # the join's one second of slack, and one more for a window's edge
WINDOW_GAP = timedelta(seconds=60)  # statements closer than this are joined in one window
WINDOW_STATEMENTS = 5000  # at most this many statements to (re)join per window


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
        mine = BinlogStatement.objects.filter(transaction__server=server)
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
    done = 0
    start = 0
    for i in range(1, len(times) + 1):
        if i == len(times) or times[i] - times[i - 1] > WINDOW_GAP or i - start >= WINDOW_STATEMENTS:
            done += _join_window(server, times[start] - PAD, times[i - 1] + PAD, boots, server_id)
            start = i
    return done


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


def _join_window(
    server: str, lo: datetime, hi: datetime, boots: list[datetime], server_id: int | None
) -> int:
    tx_ids = set(
        BinlogStatement.objects.filter(transaction__server=server, time__range=(lo, hi)).values_list(
            "transaction_id", flat=True
        )
    )
    transactions = list(
        BinlogTransaction.objects.filter(pk__in=tx_ids).order_by("commit_time", "file_name", "start")
    )
    order = {t.pk: n for n, t in enumerate(transactions)}
    by_tx = {t.pk: t for t in transactions}
    statements = list(BinlogStatement.objects.filter(transaction_id__in=tx_ids))
    rows = [
        RowStatement(
            key=s.pk,
            transaction=s.transaction_id,
            order=order[s.transaction_id],
            index=s.index,
            time=_seconds(s.time),
            text=s.text if s.has_text else None,
            thread_id=s.thread_id,
            server_id=by_tx[s.transaction_id].server_id,
            boot=_boot_of(by_tx[s.transaction_id].commit_time, boots),
        )
        for s in statements
    ]
    first = min([lo, *(s.time for s in statements)]) - PAD
    last = max([hi, *(s.time for s in statements)]) + PAD
    # Only the events that can be candidates, not a busy server's every SELECT of those seconds:
    # the same fingerprint as a row statement's text (same text means same fingerprint), a CALL
    # (a routine's rows), or the connection a row statement without text names.
    maybe = Q(statement_type="CALL") | Q(
        fingerprint__in={fingerprint(s.text) for s in statements if s.has_text}
    )
    threads = {s.thread_id for s in statements if not s.has_text and s.thread_id is not None}
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
    calls: list[LoggedStatement] = []
    event_pks: list[int] = []
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
        event_pks.append(pk)
        if normalise(sql)[:5].upper() == "CALL ":
            calls.append(s)
    results = join(logged, rows, server_id=server_id)
    event_ids: dict[Hashable, int] = {s.key: pk for s, pk in zip(logged, event_pks, strict=True)}
    row_of = {b.key: b for b in rows}
    by_pk = {s.pk: s for s in statements}
    for r in results:
        s = by_pk[r.row_statement]
        if isinstance(r, Link) and r.statement is not None:
            s.event_id, s.confidence, s.candidates, s.reason = r.statement, r.confidence, [], ""
            s.evidence = list(r.evidence)
        elif isinstance(r, Link):  # ambiguous: its candidates, never one of them as fact
            s.event_id, s.confidence, s.reason = None, BinlogStatement.Confidence.AMBIGUOUS, ""
            s.candidates, s.evidence = [event_ids[c] for c in r.candidates], list(r.evidence)
        elif isinstance(r, Unlinked):
            s.event_id, s.confidence, s.reason = None, BinlogStatement.Confidence.UNLINKED, r.reason[:300]
            s.evidence = [r.reason]
            routine = r.reason.startswith("routine")
            row = row_of[s.pk]
            s.candidates = [
                event_ids[c.key]
                for c in calls
                if routine and c.boot == row.boot and abs(c.time - row.time) <= 1
            ]
    with transaction.atomic():  # (inside join_binlogs' transaction: a savepoint)
        BinlogStatement.objects.bulk_update(
            statements, ["event_id", "confidence", "evidence", "candidates", "reason"], batch_size=1000
        )
    return len(statements)
