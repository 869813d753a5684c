"""Proof and measure of a change to the parsing process: what every stage yields, hashed, and what
the parsing side of a one-shot read costs, for one checkout's code.

    PYTHONHASHSEED=0 .venv/bin/python bench/stage_hashes.py --tree CHECKOUT --format FORMAT FILE... \
        [--time N]

For each file, three hashes (SHA-256, first 24 hex digits) and their item counts:
- `parse`: the repr of every item the format's parser yields;
- `stages`: every item out of the stages as ingest.tail runs them for a MySQL or MariaDB log
  (normalize.mysql_stages: tracker, classifier, gap finder), an event as all its fields (its
  session by its key, its flags sorted), then every event again once the read is over (what the
  corrections changed), then the tracker's and the gap finder's states at the end;
- `batches`: every Batch of ingest.tail.tail_messages as pipeline.ingest_file runs it (lines
  through FileLines and the content window, cuts every 20,000 events, the COPY formatting):
  every field but the formatted rows by their repr (the resume point, the stages' states, the
  problems, corrections and gaps), then the formatted rows (the COPY buffer, the sessions, months,
  alerts, offsets, content chunks and statements).
Run it from two checkouts (the old one given by --tree) and compare the lines: the same hashes
are the same output. PYTHONHASHSEED=0 makes the order of sets the same in both runs.

With `--time N` it measures instead, CPU seconds of this process (time.process_time), the least
of N runs, after gc.freeze() as the parsing process does: the parser alone, the parser and the
stages, and the whole parsing side of tail_messages with each batch pickled as for the pipe.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import os
import pickle
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
ap.add_argument("--format", required=True)
ap.add_argument("--time", type=int, default=0, help="measure, the least of this many runs")
ap.add_argument("files", nargs="+", type=Path)
ARGS = ap.parse_args()
FILES = [f.resolve() for f in ARGS.files]
sys.path.insert(0, str(ARGS.tree.resolve()))
os.chdir(ARGS.tree)  # (Django's set-up puts the working directory first on the path: the tree's)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django  # noqa: E402

django.setup()

from ingest.batch import Batch  # noqa: E402
from ingest.events import EventRecord  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker, mysql_stages  # noqa: E402
from ingest.parsers import by_name  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402
from ingest.rows import RowFormatter  # noqa: E402
from ingest.tail import FileLines, open_log, tail_messages  # noqa: E402

HINTS = Hints(mtime_year=2026)


def batches(path: Path) -> Iterator[Batch]:
    lines = FileLines(open_log(path).lines, 0, 1, None, partial_ok=True)
    return tail_messages(
        fmt=ARGS.format,
        lines=lines,
        finish=True,
        hints=HINTS,
        tracker=SessionTracker("bench", ZoneInfo("UTC")),
        gaps=GapFinder(),
        formatter=RowFormatter(source_file_id=1, ingest_run_id=1),
        batch_size=20_000,
        file_id=1,
    )


def stages(path: Path, tracker: SessionTracker, gaps: GapFinder) -> Iterator[object]:
    tracker.file = 1
    lines = FileLines(open_log(path).lines, 0, 1, None, partial_ok=True)
    return mysql_stages(by_name(ARGS.format).parse(lines, hints=HINTS), tracker, gaps)  # type: ignore[arg-type]  # the parser's items


def shown(out: object) -> bytes:
    if type(out) is not EventRecord:
        return repr(out).encode()
    values = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
    values["session"], values["flags"] = out.session.key, sorted(out.flags)
    return repr(sorted(values.items())).encode()


def hashes(path: Path) -> None:
    h = {name: hashlib.sha256() for name in ("parse", "stages", "batches")}
    n = dict.fromkeys(h, 0)
    for item in by_name(ARGS.format).parse(open_log(path).lines, hints=HINTS):
        h["parse"].update(repr(item).encode())
        n["parse"] += 1
    tracker, gaps = SessionTracker("bench", ZoneInfo("UTC")), GapFinder()
    events = []
    for out in stages(path, tracker, gaps):
        h["stages"].update(shown(out))
        n["stages"] += 1
        if type(out) is EventRecord:
            events.append(out)
    for event in events:
        h["stages"].update(shown(event))
    h["stages"].update(repr((tracker.to_state(), gaps.to_state())).encode())
    for batch in batches(path):
        fields = [
            (f.name, getattr(batch, f.name)) for f in dataclasses.fields(batch) if f.name != "formatted"
        ]
        h["batches"].update(repr(fields).encode())
        rows = batch.formatted
        assert rows is not None
        h["batches"].update(rows.narrow)
        kept = (rows.count, rows.sessions, sorted(rows.months), rows.alerts, rows.offsets)
        h["batches"].update(repr((kept, rows.chunks, rows.statements)).encode())
        n["batches"] += 1
    print(f"{path.name}: " + "  ".join(f"{k} {n[k]} {h[k].hexdigest()[:24]}" for k in h), flush=True)


def measure(path: Path) -> None:
    gc.freeze()
    best = [float("inf")] * 3
    events = 0
    for _ in range(ARGS.time):
        for stage in range(3):
            start = time.process_time()
            if stage == 0:
                events = sum(1 for _ in by_name(ARGS.format).parse(open_log(path).lines, hints=HINTS))
            elif stage == 1:
                for _ in stages(path, SessionTracker("bench", ZoneInfo("UTC")), GapFinder()):
                    pass
            else:
                for batch in batches(path):
                    pickle.dumps(batch, pickle.HIGHEST_PROTOCOL)
            best[stage] = min(best[stage], time.process_time() - start)
    us = [f"{b / events * 1e6:.2f}" for b in best]
    print(f"{path.name} ({ARGS.tree}): {events:,} records; us a record: parse {us[0]}, + stages {us[1]},"
          f" whole parsing side {us[2]}", flush=True)  # fmt: skip


for file in FILES:
    if ARGS.time:
        measure(file)
    else:
        hashes(file)
