"""Benchmark: the formatting stage of two checkouts on the same events, and proof of the same output.

    .venv/bin/python bench/format_compare.py --old /path/to/old/checkout --log LOG [--fmt general-log]
        [--runs 5] [--pickle]

Run from the new checkout. Its code reads the log once as ingest.tail reads it (tail_messages:
FileLines, the content window, batches of 20,000), keeping each batch's events, the window's
adds before it and where the read got (`upto`). Then the old checkout's ingest/rows.py and
ingest/chunks.py (loaded beside this one's) and this checkout's replay that formatting, taking
turns, `--runs` times each: the window's adds and RowFormatter.format of each batch, in CPU
seconds (time.process_time), the minimum kept; with --pickle also pickling each batch as the
pipe does. Every FormattedBatch field of every batch (the narrow buffer, count, alerts, offsets,
months, sessions, chunks, statements in order) is hashed (SHA-256): the two must be equal.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import os
import pickle
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, os.getcwd())  # the new checkout is the one this is run from
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditweb.settings")
os.environ.setdefault("SECRET_KEY", "bench")

import django

django.setup()

from zoneinfo import ZoneInfo  # noqa: E402

import ingest.chunks as new_chunks  # noqa: E402
import ingest.rows as new_rows  # noqa: E402
import ingest.tail as tail  # noqa: E402
from ingest.normalize import GapFinder, SessionTracker  # noqa: E402
from ingest.parsers.records import Hints  # noqa: E402

Batch = tuple[list[Any], list[tuple[int, bytes]], int | None]  # events, adds before, upto


def load_old(tree: Path) -> tuple[ModuleType, ModuleType]:
    """The old checkout's rows and chunks modules, its rows importing its own chunks."""
    modules = []
    for name, source in (
        ("old_chunks", (tree / "ingest" / "chunks.py").read_text()),
        (
            "old_rows",
            (tree / "ingest" / "rows.py").read_text().replace("from ingest.chunks", "from old_chunks"),
        ),
    ):
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))  # type: ignore[arg-type]  # a spec is made
        sys.modules[name] = module
        exec(
            compile(source, str(tree / "ingest" / f"{name[4:]}.py"), "exec"), module.__dict__
        )  # (the old checkout's own code)
        modules.append(module)
    return modules[1], modules[0]


def capture(fmt: str, log: Path) -> tuple[list[Batch], int]:
    """The batches a read of `log` formats, with the window's adds before each."""
    batches: list[Batch] = []
    adds: list[tuple[int, bytes]] = []

    class Recording(new_rows.RowFormatter):
        def format(self, events: Any, upto: int | None = None) -> Any:
            batches.append((list(events), list(adds), upto))
            adds.clear()
            return super().format(events, upto)

    class RecordingWindow(new_chunks.ContentWindow):
        def add(self, offset: int, data: bytes) -> None:
            adds.append((offset, data))
            super().add(offset, data)

    tail.ContentWindow = RecordingWindow  # type: ignore[misc]  # (this process only)
    opened = tail.open_log(log)
    lines = tail.FileLines(opened.lines, 0, 1, None, partial_ok=True)
    events = 0
    for batch in tail.tail_messages(
        fmt=fmt, lines=lines, finish=True, hints=Hints(mtime_year=2026),
        tracker=SessionTracker("bench", ZoneInfo("UTC")), gaps=GapFinder(),
        formatter=Recording(source_file_id=1, ingest_run_id=1), batch_size=20_000, file_id=1,
    ):  # fmt: skip
        events += batch.formatted.count if batch.formatted else 0
    return batches, events


def replay(
    rows: ModuleType, chunks: ModuleType, batches: list[Batch], pickled: bool
) -> tuple[float, float, str]:
    """CPU seconds of formatting (and of pickling) the batches; the SHA-256 of what came out."""
    digest = hashlib.sha256()
    formatter = rows.RowFormatter(source_file_id=1, ingest_run_id=1)
    formatter.window = window = chunks.ContentWindow()
    formatting = pickling = 0.0
    for events, added, upto in batches:
        started = time.process_time()
        for offset, data in added:
            window.add(offset, data)
        b = formatter.format(events, upto)
        formatted = time.process_time()
        if pickled:
            pickle.dumps(("item", b), pickle.HIGHEST_PROTOCOL)
        formatting += formatted - started
        pickling += time.process_time() - formatted
        digest.update(b"N%d:" % len(b.narrow) + b.narrow)
        digest.update(repr((b.count, b.alerts, b.offsets, sorted(b.months), b.sessions)).encode())
        for offset, data in b.chunks:
            digest.update(b"C%d:%d:" % (offset, len(data)) + data)
        digest.update(repr(b.statements).encode("utf-8", "surrogatepass"))
    return formatting, pickling, digest.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--fmt", default="general-log")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pickle", action="store_true")
    args = ap.parse_args()
    old_rows, old_chunks = load_old(args.old)
    batches, events = capture(args.fmt, args.log)
    gc.collect()
    gc.freeze()  # (the captured events, as the parsing process freezes what it inherits)
    best = {"old": [float("inf")] * 2, "new": [float("inf")] * 2}
    digests: dict[str, set[str]] = {"old": set(), "new": set()}
    for _ in range(args.runs):
        for name, rows, chunks in (("old", old_rows, old_chunks), ("new", new_rows, new_chunks)):
            formatting, pickling, digest = replay(rows, chunks, batches, args.pickle)
            best[name] = [min(best[name][0], formatting), min(best[name][1], pickling)]
            digests[name].add(digest)
    print(
        f"{args.log.name}: {events:,} events, {len(batches)} batches, load average {os.getloadavg()[0]:.0f}"
    )
    for name in ("old", "new"):
        formatting, pickling = best[name]
        print(
            f"  {name}: formatting {formatting:.3f} s ({formatting / max(events, 1) * 1e6:.2f} us an event), "
            f"pickling {pickling:.3f} s, SHA-256 {' '.join(sorted(digests[name]))}"
        )
    same = digests["old"] == digests["new"] and len(digests["new"]) == 1
    print("  the same output" if same else "  *** THE OUTPUT DIFFERS ***")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
