"""Benchmark: every parser and the classifier on pathological lines, up to 1 MB; one core, no database.

    .venv/bin/python bench/hostile_bench.py [--size 1048576] [--repeat 2] [--only SHAPE]

Each hostile shape of bench/regex_audit.py (runs of spaces, quotes, backslashes,
repeated keywords, nested parentheses, `/*` without end, `, Version: ` repeated...) is
put, at a quarter of --size and at --size, into:

1. the classifier alone, behind each statement head that leads a pattern to its repeats
   (`DELETE `, `SELECT * FROM t WHERE `, `CREATE PROCEDURE p() `, `SET `...);
2. one log of each format: a statement record holding `DELETE ` + the shape (escaped as the
   format escapes it), the same shape as a line of its own (garbage, or the continuation
   of the record before it), and a `DELETE` after them, run through the pure part of the
   ingest pipeline (parser, session tracker, classifier and, since issue 22's one loop, the gap
   finder), as the parsing process does.

For each it prints the CPU seconds at --size (minimum of --repeat runs) and the growth
from a quarter of the size (x4 is linear, x16 quadratic), then the worst of each
format. It fails (exit 1) if the DELETE after a hostile line is lost, or if anything
grows faster than x8. Results: docs/benchmarks.md, "Hostile input".
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from xml.sax.saxutils import quoteattr

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.regex_audit import BODIES  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker, classify_events  # noqa: E402
from ingest.parsers import by_name  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402
from ingest.sql import classify, clear_cache  # noqa: E402

try:
    from ingest.normalize import mysql_stages
except ImportError:  # a checkout before issue 22's one loop for the stages
    mysql_stages = None  # type: ignore[assignment]  # absent there

SQL_HEADS = [
    "",
    "DELETE ",
    "DELETE FROM t WHERE ",
    "SELECT * FROM t WHERE ",
    "UPDATE t SET ",
    "INSERT INTO t ",
    "CREATE ",
    "CREATE PROCEDURE p() ",
    "CREATE TABLE t ",
    "ALTER TABLE t ",
    "DROP TABLE ",
    "RENAME TABLE ",
    "GRANT ALL ON ",
    "SET ",
    "SET STATEMENT ",
    "WITH ",
    "EXPLAIN ",
    "PREPARE s FROM ",
    "USE ",
    "FLUSH ",
]


def _sa(s: str) -> str:  # server_audit's escapes
    for char, escaped in (("\\", "\\\\"), ("'", "\\'"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        s = s.replace(char, escaped)
    return s


def _table_csv(s: str) -> str:  # the CSV engine's escapes
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def _tsv(s: str) -> str:  # SELECT ... INTO OUTFILE's escapes
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


# format -> (connect line, statement line of `sql`)
FORMATS: dict[str, tuple[str, Callable[[str], str]]] = {
    "general-log": (
        "2024-05-01T10:00:00.000000Z\t    7 Connect\troot@localhost on shop using Socket\n",
        lambda s: f"2024-05-01T10:00:01.000000Z\t    7 Query\t{s}\n",
    ),
    "mariadb-audit": (
        "20240501 10:00:00,db1,alice,10.0.0.7,7,0,CONNECT,shop,,0\n",
        lambda s: f"20240501 10:00:01,db1,alice,10.0.0.7,7,2,QUERY,shop,'{_sa(s)}',0\n",
    ),
    "mariadb-audit-syslog": (
        "<14>Mar  1 12:00:00 vm mysql-server_auditing:  db1,alice,10.0.0.7,7,0,CONNECT,shop,,0\n",
        lambda s: (
            f"<14>Mar  1 12:00:01 vm mysql-server_auditing:  db1,alice,10.0.0.7,7,2,QUERY,shop,'{_sa(s)}',0\n"
        ),
    ),
    "json-audit": (
        '{"msg-type":"activity","date":"1767603600000","thread-id":"7","user":"eve","cmd":"Connect"}\n',
        lambda s: (
            json.dumps({"msg-type": "activity", "date": "1767603601000", "thread-id": "7", "query": s}) + "\n"
        ),
    ),
    "xml-audit": (
        '<AUDIT>\n<AUDIT_RECORD NAME="Connect" TIMESTAMP="2026-01-05T09:00:00 UTC" CONNECTION_ID="7"'
        ' STATUS="0" USER="bob" HOST="h" IP="10.0.0.8" DB="shop"/>\n',
        lambda s: (
            '<AUDIT_RECORD NAME="Query" TIMESTAMP="2026-01-05T09:00:01 UTC" CONNECTION_ID="7"'
            f' STATUS="0" SQLTEXT={quoteattr(s)}/>\n'
        ),
    ),
    "audit-csv": (
        '"Connect","1_2026","2026-01-05T09:00:00 UTC",7,0,"bob","bob","","","h","10.0.0.8","shop"\n',
        lambda s: (
            '"Query","2_2026","2026-01-05T09:00:01 UTC","delete",7,0,"'
            + s.replace('"', '""')  # the server doubles quotes, nothing else: newlines stay
            + '","bob","h","","10.0.0.8","shop"\n'
        ),
    ),
    "general-log-csv": (
        '"2026-11-22 12:15:50.297889","bob[bob] @  [127.0.0.1]",7,1,"Connect","bob@127.0.0.1 on shop"\n',
        lambda s: f'"2026-11-22 12:15:51.297889","bob[bob] @  [127.0.0.1]",7,1,"Query","{_table_csv(s)}"\n',
    ),
    "general-log-tsv": (
        "2026-11-22 12:15:50.297889\tbob[bob] @  [127.0.0.1]\t7\t1\tConnect\tbob@127.0.0.1 on shop\n",
        lambda s: f"2026-11-22 12:15:51.297889\tbob[bob] @  [127.0.0.1]\t7\t1\tQuery\t{_tsv(s)}\n",
    ),
}


def log_of(fmt: str, body: str) -> list[bytes]:
    connect, statement = FORMATS[fmt]
    garbage = body.replace("\n", " ") + "\n"  # the shape as a line of its own
    lines = [connect, statement("DELETE " + body), garbage, statement("DELETE FROM after")]
    if fmt == "xml-audit":
        lines.append("</AUDIT>\n")
    return [line.encode("utf-8", "surrogateescape") for line in lines]


# Each sample's parser, from the registry (no Django here); the syslog samples are server_audit's.
HINTS = Hints(mtime_year=2024)


def _parse(fmt: str, lines: Iterable[bytes]) -> Iterator[object]:
    return by_name(fmt.removesuffix("-syslog")).parse(lines, hints=HINTS)


def run_pipeline(fmt: str, lines: list[bytes]) -> list[object]:
    tracker = SessionTracker("bench")
    items: Iterable[object] = _parse(fmt, iter(lines))
    if mysql_stages is not None:  # tracker, classifier and gap finder in one loop, as ingest.tail runs them
        return list(mysql_stages(items, tracker, GapFinder()))  # type: ignore[arg-type]  # the registry's parsers yield Items, typed `object` here
    return list(classify_events(tracker.process(items), tracker.routines))  # type: ignore[arg-type]  # as above


def cpu(work: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        clear_cache()
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def cases(size: int, only: str) -> Iterator[tuple[str, str, Callable[[int], Callable[[], object]]]]:
    wanted = set(only.split(";")) if only else set(BODIES)
    for shape, body in BODIES.items():
        if shape not in wanted:
            continue
        for head in SQL_HEADS:
            yield "classifier", f"{head!r}+{shape}", lambda n, h=head, b=body: lambda: classify(h + b(n))
        for fmt in FORMATS:
            yield fmt, shape, lambda n, f=fmt, b=body: lambda: run_pipeline(f, log_of(f, b(n)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", default="", help="shapes of bench/regex_audit.py BODIES, separated by ';'")
    ap.add_argument("--verbose", action="store_true", help="print every case as it is measured")
    args = ap.parse_args()
    machine = platform.processor() or platform.machine()
    print(f"# {machine}, Python {platform.python_version()}, size {args.size}")
    worst: dict[str, tuple[float, float, str]] = {}
    failures = []
    for where, shape, make in cases(args.size, args.only):
        quarter = cpu(make(args.size // 4), 1)
        full = cpu(make(args.size), args.repeat)
        growth = full / max(quarter, 1e-4)
        if growth > 8 and full > 0.05:
            failures.append(f"{where} {shape}: {full:.3f}s, x{growth:.1f}")
        if where != "classifier":
            events = run_pipeline(where, log_of(where, BODIES[shape](1000)))
            if not any("after" in (getattr(e, "sql", "") or "") for e in events):
                failures.append(f"{where} {shape}: the DELETE after the hostile line was lost")
        if args.verbose:
            print(f"  {where} {shape}: {full:.3f}s x{growth:.1f}", flush=True)
        if full > worst.get(where, (0.0,))[0]:
            worst[where] = (full, growth, shape)
    print(f"{'where':<22} {'worst CPU s at size':>20} {'growth x4':>10}  shape")
    for where, (full, growth, shape) in worst.items():
        print(f"{where:<22} {full:>20.3f} {growth:>10.1f}  {shape}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
