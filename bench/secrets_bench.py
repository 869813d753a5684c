"""Benchmark: masking secrets (ingest.sql.secrets) stays linear on hostile statements, and costs
little on ordinary ones. One core, no database.

    .venv/bin/python bench/secrets_bench.py [--size 1048576] [--repeat 5]

1. Pathological statements of --size characters and of a quarter of it, built to keep the masker
   busy: thousands of `IDENTIFIED BY 'x'` clauses, one unterminated literal after IDENTIFIED BY,
   nested PASSWORD(AES_ENCRYPT(...)) calls, comments between every keyword, backslash runs inside
   a literal, a hex literal that decodes to a statement with a password, a PREPARE text nesting
   itself three times. The time of the large one over the small one is ~4 when the work is
   linear (16 for quadratic).
2. The statements of the mariadb-slap general log (tests/fixtures/genlog), which hold no secret:
   the cost of the pre-check per statement.
Best of --repeat, CPU time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ingest.sql.secrets import mask_secrets  # noqa: E402


def hostile(size: int) -> dict[str, str]:
    def fill(piece: str) -> str:
        return (piece * (size // len(piece) + 1))[:size]

    nest = "CREATE USER x IDENTIFIED BY 'pw'"
    for _ in range(3):
        nest = "PREPARE s FROM '" + nest.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return {
        "many IDENTIFIED BY clauses": "CREATE USER " + fill("u IDENTIFIED BY 'x', "),
        "unterminated literal": "CREATE USER u IDENTIFIED BY '" + fill("ab\\'"),
        "nested secret calls": "SELECT " + fill("PASSWORD(AES_ENCRYPT(c, 'k'), "),
        "comments between keywords": "ALTER USER u " + fill("IDENTIFIED /* c */ BY /*!1 */ "),
        "backslashes in a literal": "SET PASSWORD = '" + fill("\\\\") + "'",
        "hex literal with a statement": "SET @h = X'" + fill(b"IDENTIFIED BY 'pw' ".hex()) + "'",
        "trigger words, no value": "SELECT " + fill("password, identified, encode, "),
        "PREPARE text nested 3 deep": fill(nest + "; "),
    }


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1024 * 1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    large, small = hostile(args.size), hostile(args.size // 4)
    print(f"{'statement':32} {'size':>9} {'time':>9} {'size/4':>9} {'ratio':>6}")
    for name, text in large.items():
        t_large = best(lambda text=text: mask_secrets(text), args.repeat)
        t_small = best(lambda name=name: mask_secrets(small[name]), args.repeat)
        ratio = t_large / max(t_small, 1e-9)
        print(f"{name:32} {len(text):>9,} {t_large:>8.3f}s {t_small:>8.3f}s {ratio:>6.1f}")
    slap = REPO / "tests" / "fixtures" / "genlog" / "mariadb-10.11.19-slap.log"
    statements = [line.split(b"\t")[-1].decode("utf-8", "replace") for line in slap.read_bytes().splitlines()]
    n = len(statements)
    t = best(lambda: [mask_secrets(s) for s in statements], args.repeat)
    print(f"mariadb-slap general log: {n:,} lines in {t:.3f}s, {t / n * 1e6:.2f} µs a line")
    return 0


if __name__ == "__main__":
    sys.exit(main())
