"""Hostile bytes never crash the pgAudit parsers: each bad piece is a Problem at its place."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ingest.parsers.records import LogRecord, Problem
from tests.parsers.pgaudit_truth import LAYOUTS

SCENE = Path(__file__).resolve().parents[1] / "fixtures" / "pgaudit_scene"


def _sample(suffix: str) -> bytes:
    return next(p for p in sorted(SCENE.iterdir()) if p.name.endswith(f"-1.{suffix}")).read_bytes()


@pytest.mark.parametrize("layout", ["csv", "json", "log"])
def test_it_survives_cut_flipped_and_junk_bytes(layout: str) -> None:
    parse = LAYOUTS[layout].parse
    data = _sample(layout)
    rng = random.Random(23)
    for _ in range(60):
        mangled = bytearray(data)
        for _ in range(rng.randint(1, 12)):
            at = rng.randrange(len(mangled))
            mangled[at : at + rng.randint(0, 40)] = bytes(
                rng.randrange(256) for _ in range(rng.randint(0, 8))
            )
        mangled = mangled[: rng.randrange(len(mangled) + 1)]
        items = list(parse(bytes(mangled).splitlines(keepends=True)))
        offsets = [i.offset for i in items]
        assert offsets == sorted(offsets)
        assert all(0 <= o <= len(mangled) for o in offsets)


@pytest.mark.parametrize("layout", ["csv", "json", "log"])
def test_forged_audit_text_inside_a_statement_is_not_a_record(layout: str) -> None:
    items = list(LAYOUTS[layout].parse(_sample(layout).splitlines(keepends=True)))
    fakes = [i for i in items if isinstance(i, LogRecord) and i.argument == b"fake"]
    assert fakes == []


def test_an_unclosed_csv_quote_is_one_problem_not_a_lost_file() -> None:
    data = _sample("csv")
    lines = data.splitlines(keepends=True)
    broken = [
        b'2026-11-25 01:16:17.404 UTC,"x","y",1,,1.1,1,,,,0,LOG,00000,'
        b'"AUDIT: SESSION,1,1,WRITE,DELETE,,,"never closed\n'
    ]
    # CSV has no other way to end a quoted field: the record runs until a quote closes it, and
    # is one problem; what follows is read again from there (never a forged record from
    # inside a statement, which starting afresh at a line that looks like a record would make).
    items = list(LAYOUTS["csv"].parse(broken + lines[:3]))
    assert isinstance(items[0], Problem) and items[0].offset == 0
    assert all(i.offset > 0 for i in items[1:])


def test_huge_and_binary_lines() -> None:
    junk = [
        b"\x00\xff" * 100 + b"\n",
        b"{" * 5000 + b"\n",
        b'{"error_severity":"LOG","message":"AUDIT: x"}\n',
    ]
    for layout in ("csv", "json"):
        items = list(LAYOUTS[layout].parse(junk))
        assert items and all(isinstance(i, Problem) for i in items)
    head = _sample("log").splitlines(keepends=True)[:1]
    items = list(LAYOUTS["log"].parse(head + junk + [b"\t" + b"a" * 100000 + b"\n"]))
    assert any(isinstance(i, Problem) for i in items)
