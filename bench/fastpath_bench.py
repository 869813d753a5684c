"""Benchmark: CPU seconds of each stage of a one-shot ingest's two processes, without a database.

    .venv/bin/python bench/fastpath_bench.py [--log bench/out/slap-general.log] [--runs 5]

Run it from each checkout to compare them (issue 22): `cd /other/checkout && python
/this/checkout/bench/fastpath_bench.py --log ...` measures that checkout's code. The parsing
process is run over the general log one stage further each time, as bench/stages_bench.py does:
parse; + sessions; + classification and gaps; + COPY formatting and pickling each batch for the
pipe (the last three stages as ingest.tail runs them: since issue 22, one loop,
normalize.mysql_stages). The writing process's share is then timed on those pickles:
unpickling, the COPY buffer, the custody chain's row digests. CPU time of this process
(time.process_time), the minimum of `--runs`; also the COPY bytes per event.

Since issue 22's chunks (a checkout with ingest/chunks.py): the formatting stage reads through
`FileLines` with its content window, as ingest.tail does, and writes slices' lengths instead of
raw bytes; the writer's share adds the chunks' SHA-256 and zstd (ingest.chunks.pack) and the
links of version 2 (one SHA-256 of the batch, a CRC-32 per row). Also the chunk bytes per event.
A checkout whose batches carry no wide lines (custody links of version 3) digests the narrow
buffer and the statements its rows name instead.
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, os.getcwd())  # the checkout measured is the one this is run from
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django

django.setup()

from ingest import custody  # noqa: E402
from ingest.events import EventRecord  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker, classify_events  # noqa: E402
from ingest.parsers import by_name  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402
from ingest.rows import RowFormatter  # noqa: E402
from ingest.tail import open_log  # noqa: E402

STAGES = ("parse", "+ sessions", "+ classify", "+ format, pickle", "writer: unpickle, buffer, digests")
BATCH = 20_000  # INGEST_BATCH_SIZE's default


try:
    from ingest.normalize import mysql_stages
except ImportError:  # a checkout before issue 22's one loop for the stages
    mysql_stages = None  # type: ignore[assignment]  # absent there

try:
    from ingest.chunks import ContentWindow, pack
    from ingest.tail import FileLines
except ImportError:  # a checkout before issue 22's chunks
    ContentWindow = None  # type: ignore[assignment,misc]  # absent there


def items(path: Path, stage: int, window: object = None) -> Iterator[object]:
    opened = open_log(path)
    tracker = SessionTracker("bench", ZoneInfo("UTC"))
    lines: object = opened.lines
    if window is not None:  # the content kept for the chunks, as ingest.tail keeps it
        lines = FileLines(opened.lines, 0, 1, None, partial_ok=True)
        lines.window = window
    out: Iterator[object] = by_name("general-log").parse(lines, hints=Hints(mtime_year=2026))
    if stage == 1:
        out = tracker.process(out)  # type: ignore[arg-type]  # one variable for every stage's output
    elif stage >= 2 and mysql_stages is not None:  # as ingest.tail runs them: one loop
        out = mysql_stages(out, tracker, GapFinder())  # type: ignore[arg-type]  # as above
    elif stage >= 2:
        out = GapFinder().process(classify_events(tracker.process(out), tracker.routines))  # type: ignore[arg-type]  # as above
    return out


def parsing(path: Path, stage: int) -> tuple[float, list[bytes]]:
    start = time.process_time()
    if stage < 3:
        for _ in items(path, stage):
            pass
        return time.process_time() - start, []
    formatter = RowFormatter(source_file_id=1, ingest_run_id=1)
    window = None
    if ContentWindow is not None:
        window = formatter.window = ContentWindow()
    batch: list[EventRecord] = []
    pickles = []
    for item in items(path, stage, window):
        if isinstance(item, EventRecord):
            batch.append(item)
            if len(batch) >= BATCH:
                pickles.append(pickle.dumps(("item", formatter.format(batch)), pickle.HIGHEST_PROTOCOL))
                batch = []
    last = formatter.format(batch) if window is None else formatter.format(batch, upto=1 << 62)
    pickles.append(pickle.dumps(("item", last), pickle.HIGHEST_PROTOCOL))
    return time.process_time() - start, pickles


def writing(pickles: list[bytes]) -> tuple[float, int, int]:
    """CPU seconds of the writer's own work on the batches; COPY bytes and events."""
    start = time.process_time()
    size = events = kept = 0
    for message in pickles:
        batch = pickle.loads(message)[1]  # our own pickles, made above
        if hasattr(batch, "chunks"):  # since issue 22's chunks: packed; a link of version 2
            kept += sum(len(c.data) for c in pack(batch.chunks))
            lines = batch.lines
            data = getattr(batch, "copy", None)
            if data is None:  # custody links of version 3: the narrow buffer and its statements
                data = batch.narrow
                records = getattr(batch, "statement_keys", None)  # since stw22: the records as sent
                if records is None:
                    records = [(row[0], row[1]) for row in batch.statements]
                custody.batch_digest(data, records)
            else:  # version 2: the wide lines made besides the narrow ones
                custody.hashlib.sha256(data).digest()
            custody.row_checks(lines)
            size += len(data)
            events += len(lines)
            continue
        if isinstance(getattr(batch, "copy", None), bytes):  # since issue 22: one buffer
            data, digests = batch.copy, custody.copy_digests(batch.lines)
        else:  # before: one string per event, joined and encoded by the writer
            data = "".join(batch.rows).encode()
            digests = b"".join(custody.row_digest(r) for r in batch.rows)
        size += len(data)
        events += len(digests) // custody.ROW_DIGEST_BYTES
    WRITTEN["chunk bytes"] = kept
    return time.process_time() - start, size, events


WRITTEN: dict[str, int] = {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, default=Path(__file__).resolve().parent / "out" / "slap-general.log")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--freeze",
        action="store_true",
        help="gc.freeze() first, as the parsing process does since issue 22's lean parsing side",
    )
    args = ap.parse_args()
    if args.freeze:
        gc.freeze()
    best = [float("inf")] * len(STAGES)
    size = events = 0
    for _ in range(args.runs):
        for stage in range(4):
            seconds, pickles = parsing(args.log, stage)
            best[stage] = min(best[stage], seconds)
        seconds, size, events = writing(pickles)
        best[4] = min(best[4], seconds)
    print(f"checkout {os.getcwd()}: {events:,} events, {size / max(events, 1):.0f} COPY bytes an event")
    if WRITTEN.get("chunk bytes"):
        kept = WRITTEN["chunk bytes"]
        print(f"content chunks (zstd): {kept:,} bytes, {kept / events:.1f} an event")
    print("| " + " | ".join(STAGES) + " |")
    print("|" + " --- |" * len(STAGES))
    print("| " + " | ".join(f"{s:.3f} s" for s in best) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
