"""The join: which logged statement made which binlog row statement, and how sure we are.

A pure function of two lists (no Django): statements from the general or audit log and row
statements from the metadata pass. The reasoning is in docs/architecture.md, "Binary
logs"; in short:

1. A binlog statement's candidates are the logged statements of the same server boot,
   within a second of its time, with the same text (annotate text, whitespace folded) and,
   where the binlog names a thread (MySQL's BEGIN, MariaDB 11.5+), that thread.
2. Candidates form components (statements linked by shared candidates); each component is
   solved as one assignment problem: every binlog statement gets at most one logged
   statement and vice versa, the statements of one transaction come from one connection in
   its order, and each connection's statements commit in the order it sent them. Among the
   assignments with the most links we keep every one (up to a cap).
3. A link in all of them is sure: `thread_id` (the binlog named the thread),
   `unique_text_and_time` (its only candidate, and that candidate's only binlog statement),
   `ordered_assignment` (several candidates, the constraints leave one). A binlog statement
   linked differently across them is `ambiguous`, with its candidates: shown as such.
4. What no statement explains stays unlinked with a reason: another server id
   (replication), a CALL at that moment (a routine's body), no text to match, or nothing
   in the logs (an event scheduler job or a statement the logs lack).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ingest.binlog.metadata import Transaction

SLACK_SECONDS = 1  # the binlog stamps a statement's start; a log, its arrival: same second or next
MAX_COMPONENT = 14  # binlog statements solved exactly together; bigger groups are `ambiguous`
MAX_SOLUTIONS = 64
MAX_STEPS = 200_000


@dataclass(slots=True, frozen=True)
class LoggedStatement:
    key: Hashable  # the event's id
    time: int  # seconds since the epoch, UTC
    connection_id: int | None
    sql: str
    seq: int  # order within its session (connection in a boot)
    boot: Hashable  # which server boot (start time or a counter)


@dataclass(slots=True, frozen=True)
class RowStatement:
    key: Hashable  # (file, transaction start, index) or any stable id
    transaction: Hashable
    order: int  # commit order of its transaction (then `index`)
    index: int  # position within its transaction
    time: int
    text: str | None
    thread_id: int | None
    server_id: int
    boot: Hashable


@dataclass(slots=True, frozen=True)
class Link:
    row_statement: Hashable
    statement: Hashable | None  # None when ambiguous
    confidence: str  # thread_id, unique_text_and_time, ordered_assignment, ambiguous
    evidence: tuple[str, ...]
    candidates: tuple[Hashable, ...] = ()


@dataclass(slots=True, frozen=True)
class Unlinked:
    row_statement: Hashable
    reason: str


def _utc(epoch: int) -> str:
    """A time of the evidence as a reader reads it (both sides are whole seconds, UTC)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def normalise(sql: str) -> str:
    return " ".join(sql.split()).rstrip(";").strip()


def join(
    logged: Sequence[LoggedStatement], rows: Sequence[RowStatement], *, server_id: int | None = None
) -> list[Link | Unlinked]:
    """Links and unlinked row statements, one per row statement, in the order of `rows`."""
    server_id = server_id if server_id is not None else _usual_server(rows)
    # Logged statements by (boot, text) and by (boot, connection), each in time order: a row
    # statement's candidates are a bisected slice of one of them, never a scan of all of them
    # (a loop sending one text thousands of times would make that quadratic).
    by_text: dict[Hashable, list[LoggedStatement]] = {}
    by_connection: dict[Hashable, list[LoggedStatement]] = {}
    calls: dict[Hashable, list[LoggedStatement]] = {}
    for s in sorted(logged, key=lambda s: s.time):
        text = normalise(s.sql)
        by_text.setdefault((s.boot, text), []).append(s)
        by_connection.setdefault((s.boot, s.connection_id), []).append(s)
        if text[:5].upper() == "CALL ":
            calls.setdefault(s.boot, []).append(s)
    text_times, connection_times = _times(by_text), _times(by_connection)
    call_times = _times(calls)
    position = {id(s): n for n, s in enumerate(logged)}
    results: dict[Hashable, Link | Unlinked] = {}
    edges: dict[Hashable, list[LoggedStatement]] = {}
    ours = []
    for b in rows:
        if server_id is not None and b.server_id != server_id:
            why = f"replication: written by server id {b.server_id}, not {server_id}"
            results[b.key] = Unlinked(b.key, why)
            continue
        if b.text is None and b.thread_id is None:
            results[b.key] = Unlinked(b.key, "the binlog has neither the statement's text nor its thread")
            continue
        if b.text is not None:
            near = _near(by_text, text_times, (b.boot, normalise(b.text)), b.time)
        else:  # a thread and no text: that connection's statements of that boot
            near = _near(by_connection, connection_times, (b.boot, b.thread_id), b.time)
        found = [s for s in near if b.thread_id is None or s.connection_id == b.thread_id]
        found.sort(key=lambda s: position[id(s)])  # in the order given, as the solver expects
        edges[b.key] = found
        ours.append(b)
    for component in _components(ours, edges):
        results.update(_solve(component, edges))
    for b in ours:
        if b.key not in results or isinstance(results[b.key], Unlinked):
            results[b.key] = Unlinked(b.key, _why_unlinked(b, edges[b.key], calls, call_times))
    return [results[b.key] for b in rows]


def _times(groups: Edges) -> dict[Hashable, list[int]]:
    return {k: [s.time for s in v] for k, v in groups.items()}


def _near(groups: Edges, times: dict[Hashable, list[int]], key: Hashable, at: int) -> list[LoggedStatement]:
    """The statements of one group (in time order) within the slack of `at`."""
    if key not in groups:
        return []
    t = times[key]
    return groups[key][bisect_left(t, at - SLACK_SECONDS) : bisect_right(t, at + SLACK_SECONDS)]


def _usual_server(rows: Sequence[RowStatement]) -> int | None:
    counts: dict[int, int] = {}
    for b in rows:
        counts[b.server_id] = counts.get(b.server_id, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else None


Edges = dict[Hashable, list[LoggedStatement]]


def _why_unlinked(b: RowStatement, found: list[LoggedStatement], calls: Edges, call_times: dict) -> str:
    if found:
        return "its candidates were all taken by other row statements"
    near = _near(calls, call_times, b.boot, b.time)
    if near:
        return f"routine: inside a CALL at that moment ({len(near)} candidate CALL{'s' * (len(near) > 1)})"
    return (
        "no logged statement at that moment with this text: an event scheduler job, a trigger's"
        " or routine's statement, or a statement the logs do not hold"
    )


def _components(rows: list[RowStatement], edges: Edges) -> Iterable[list[RowStatement]]:
    """Row statements sharing candidates (or a transaction) end up together."""
    parent: dict[Hashable, Hashable] = {}

    def find(x: Hashable) -> Hashable:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for b in rows:
        find(("b", b.key))
        union = [("t", b.transaction)] + [("l", s.key) for s in edges[b.key]]
        for other in union:
            parent[find(other)] = find(("b", b.key))
    groups: dict[Hashable, list[RowStatement]] = {}
    for b in rows:
        groups.setdefault(find(("b", b.key)), []).append(b)
    return groups.values()


def _solve(component: list[RowStatement], edges: Edges) -> dict[Hashable, Link]:
    """Every assignment of the component with the most links, then one Link per row
    statement that has a candidate (steps 2 and 3 of the module docstring)."""
    order = sorted(component, key=lambda b: (b.order, b.index))
    if not any(edges[b.key] for b in order):
        return {}
    if len(order) > MAX_COMPONENT:
        why = [f"{len(order)} row statements compete for these statements: too many to order"]
        return {b.key: _ambiguous(b, edges[b.key], why) for b in order if edges[b.key]}
    best: list[dict[Hashable, LoggedStatement | None]] = []
    best_count = -1
    chosen: dict[Hashable, LoggedStatement | None] = {}
    used: set[Hashable] = set()
    steps = 0
    remaining = [sum(1 for b in order[i:] if edges[b.key]) for i in range(len(order) + 1)]

    def consistent(b: RowStatement, s: LoggedStatement) -> bool:
        for other in order:
            o = chosen.get(other.key)
            if other.key not in chosen or o is None:
                continue
            same_conn = (o.boot, o.connection_id) == (s.boot, s.connection_id)
            if other.transaction == b.transaction and not same_conn:
                return False  # one transaction, one connection
            if same_conn and ((other.order, other.index) < (b.order, b.index)) != (o.seq < s.seq):
                return False  # a connection commits in the order it sends
        return True

    def walk(i: int, count: int) -> None:
        nonlocal best_count, steps
        steps += 1
        if steps > MAX_STEPS or count + remaining[i] < best_count:
            return
        if i == len(order):
            if count > best_count:
                best.clear()
                best_count = count
            if count == best_count and len(best) < MAX_SOLUTIONS:
                best.append(dict(chosen))
            return
        b = order[i]
        for s in edges[b.key]:
            if s.key not in used and consistent(b, s):
                chosen[b.key] = s
                used.add(s.key)
                walk(i + 1, count + 1)
                used.discard(s.key)
                del chosen[b.key]
        chosen[b.key] = None
        walk(i + 1, count)
        del chosen[b.key]

    walk(0, 0)
    links: dict[Hashable, Link] = {}
    if steps > MAX_STEPS:
        for b in order:
            if edges[b.key]:
                links[b.key] = _ambiguous(b, edges[b.key], ["too many possible assignments to decide"])
        return links
    for b in order:
        picks = {_key(sol.get(b.key)): sol.get(b.key) for sol in best}
        cands = edges[b.key]
        if not cands:
            continue
        if len(picks) > 1:
            options = [p for p in picks.values() if p is not None]
            links[b.key] = _ambiguous(b, options or cands, [f"{len(options)} statements fit equally well"])
            continue
        s = next(iter(picks.values()))
        if s is None:
            continue
        evidence = [f"same server boot; logged at {_utc(s.time)}, binlog statement at {_utc(b.time)}"]
        if b.text is not None:
            evidence.append("same statement text (annotate rows event)")
        sharing = sum(1 for other in order if any(c.key == s.key for c in edges[other.key]))
        if b.thread_id is not None:
            confidence = "thread_id"
            evidence.append(f"the binlog names thread {b.thread_id}, the statement's connection")
        elif len(cands) == 1 and sharing == 1:
            confidence = "unique_text_and_time"
            evidence.append("the only statement with this text at that moment, and it made only these rows")
        else:
            confidence = "ordered_assignment"
            evidence.append(
                f"{len(cands)} candidate statements, {sharing} row statements for this one: the only"
                " assignment where each transaction is one connection's and each connection commits in"
                " the order it sent"
            )
        links[b.key] = Link(b.key, s.key, confidence, tuple(evidence))
    return links


def _key(s: LoggedStatement | None) -> Hashable:
    return None if s is None else s.key


def _ambiguous(b: RowStatement, cands: Sequence[LoggedStatement], why: list[str]) -> Link:
    return Link(b.key, None, "ambiguous", tuple(why), tuple(c.key for c in cands))


def row_statements(
    transactions: Iterable[Transaction], boot_of: Callable[[Transaction], Hashable] | None = None
) -> list[RowStatement]:
    """RowStatements from the metadata pass's transactions, given in commit (file) order;
    `boot_of(transaction)` names its server boot (default: all one boot)."""
    out: list[RowStatement] = []
    for n, tx in enumerate(transactions):
        boot = boot_of(tx) if boot_of is not None else None
        key = (tx.file, tx.start)
        for i, s in enumerate(tx.statements):
            if s.changes:
                out.append(RowStatement((*key, i), key, n, i, s.time, s.text, tx.thread_id or s.thread_id,
                                        tx.server_id, boot))  # fmt: skip
    return out
