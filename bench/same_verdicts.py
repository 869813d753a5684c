"""Check: one digest of everything the parser and the stages make of each log, to compare checkouts.

    cd <checkout> && python <this checkout>/bench/same_verdicts.py LOG...

Run from each checkout (its code is the one measured, as bench/fastpath_bench.py does); the
digests must be equal line for line. Each log's format is detected; the stages run as
`ingest.tail` runs them (`normalize.mysql_stages` for the MySQL dialect, else the chain of the
tracker, the dialect's classifier and the gap finder). Every output goes into the digest: each
`EventRecord` field, its session's key and account, its record hash; every problem, flag
correction and gap; then both stages' states at the end. No database.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, os.getcwd())  # the checkout measured is the one this is run from
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django

django.setup()

from ingest.events import EventRecord  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker, classifier_for, mysql_stages  # noqa: E402
from ingest.parsers import by_name, dialect_of  # noqa: E402
from ingest.parsers.detect import detect_format  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402
from ingest.tail import open_log  # noqa: E402


def shown(out: object) -> str:
    """What one output says, as text."""
    if isinstance(out, EventRecord):
        s = out.session
        return repr(
            (
                "event", out.occurred_at, s.key, s.user, s.host, s.ip, s.attribution, out.server,
                out.connection_id, out.user, out.host, out.ip, out.database, out.command, out.sql,
                out.raw, out.line, out.offset, out.statement_type, out.tables, out.destructive,
                sorted(out.flags), out.fingerprint, out.rows_affected, out.status, out.attribution,
                out.definer, out.note, out.counter, out.extra, out.record_hash(),
            )
        )  # fmt: skip
    return repr(out)


def digest(path: Path) -> str:
    fmt = detect_format(path.read_bytes()[:4096])
    if fmt == "binlog":
        return f"{'-':24s} {0:8d} {fmt:20s} {path} (not read here)"
    dialect = dialect_of(fmt)
    tracker, gaps = SessionTracker("db1", ZoneInfo("UTC"), dialect), GapFinder(dialect)
    items = by_name(fmt).parse(open_log(path).lines, hints=Hints(mtime_year=2026))
    if dialect == "mysql":
        outs = mysql_stages(items, tracker, gaps)
    else:
        outs = gaps.process(classifier_for(dialect)(tracker.process(items), tracker.routines))
    h, count = hashlib.sha256(), 0
    for out in outs:
        h.update(shown(out).encode("utf-8", "surrogatepass") + b"\n")
        count += 1
    h.update(repr((tracker.to_state(), gaps.to_state())).encode("utf-8", "surrogatepass"))
    return f"{h.hexdigest()[:24]} {count:8d} {fmt:20s} {path}"


def main() -> int:
    for name in sys.argv[1:]:
        try:
            print(digest(Path(name)), flush=True)
        except ValueError:  # no format recognised: not a log
            continue
    return 0


if __name__ == "__main__":
    sys.exit(main())
