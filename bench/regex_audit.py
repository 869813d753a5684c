"""Audit: every regular expression of the parsers and the classifier on hostile text.

    .venv/bin/python bench/regex_audit.py [--size 2000] [--limit 0.005]

Finds each compiled pattern at module level in ingest/parsers/, ingest/sql/ and
ingest/normalize.py, and runs `search` and `match` on a catalogue of hostile strings
(runs of spaces, quotes, backslashes, repeated keywords, nested parentheses, `/*`
without end...) behind prefixes that lead a pattern to its repeats (`DELETE `,
`CREATE DEFINER=`, a log line's head...). A pattern is suspect when a string of
--size characters costs more than --limit CPU seconds; suspects are measured again at
a quarter and at four times the size, and the growth printed: x4 is linear, x16
quadratic, x64 cubic. It is how the patterns fixed for issue 18 were found; the
hostile shapes it knows are those bench/hostile_bench.py runs end to end at 1 MB.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MODULES = ["ingest.normalize"] + [
    f"{package}.{m.name}"
    for package in ("ingest.parsers", "ingest.sql")
    for m in pkgutil.iter_modules([str(REPO / package.replace(".", "/"))])
]

PREFIXES = [
    "",
    "DELETE ",
    "DELETE a",
    "DELETE FROM ",
    "SELECT ",
    "SELECT * FROM t WHERE ",
    "UPDATE ",
    "INSERT INTO t ",
    "CREATE ",
    "CREATE DEFINER=",
    "CREATE PROCEDURE p() ",
    "CREATE TABLE t ",
    "ALTER TABLE t ",
    "ALTER ",
    "DROP TABLE ",
    "RENAME TABLE ",
    "GRANT ALL ON ",
    "SET ",
    "SET STATEMENT ",
    "WITH ",
    "EXPLAIN ",
    "LOCK TABLES ",
    "PREPARE s FROM ",
    "FLUSH ",
    "USE ",
    "user@",
    "2023-01-01T00:00:00.000000Z\t    3 Query\t",
    "\t\t   51 Connect\t",
    "20230101 12:00:00,db1,",
    "<14>Mar  1 12:00:00 ",
    "<14>1 ",
    "Access denied for user '",
    '{"audit_record":{"sqltext":"',
    "<AUDIT_RECORD ",
    '"2023-01-01 00:00:00","root[root] @ localhost []",',
]

# Each builds a hostile string of about n characters.
BODIES = {
    "spaces": lambda n: " " * n,
    "spaces+x": lambda n: " " * n + "x",
    "tabs": lambda n: "\t" * n,
    "newlines": lambda n: "\n" * n,
    "words": lambda n: "a" * n,
    "digits": lambda n: "1" * n,
    "single quotes": lambda n: "'" * n,
    "double quotes": lambda n: '"' * n,
    "backticks": lambda n: "`" * n,
    "backslashes": lambda n: "\\" * n,
    "escaped quotes": lambda n: "\\'" * (n // 2),
    "open parens": lambda n: "(" * n,
    "close parens": lambda n: ")" * n,
    "paren pairs": lambda n: "()" * (n // 2),
    "comment opens": lambda n: "/*" * (n // 2),
    "comment": lambda n: "/*" + "x" * n,
    "exec comments": lambda n: "/*!" * (n // 3),
    "dashes": lambda n: "-- " * (n // 3),
    "hashes": lambda n: "#" * n,
    "commas": lambda n: "," * n,
    "comma spaces": lambda n: ", " * (n // 2),
    "dots": lambda n: "." * n,
    "a.": lambda n: "a." * (n // 2),
    "`a`.": lambda n: "`a`." * (n // 4),
    "at signs": lambda n: "@" * n,
    "a@": lambda n: "a@" * (n // 2),
    "colons": lambda n: ":" * n,
    "equals": lambda n: "=" * n,
    "semicolons": lambda n: ";" * n,
    "a b": lambda n: "a " * (n // 2),
    "a, b": lambda n: "a, " * (n // 3),
    "a AS b,": lambda n: "a AS b, " * (n // 8),
    "t.*,": lambda n: "t.*, " * (n // 5),
    ", Version: ": lambda n: ", Version: " * (n // 11),
    "started with:": lambda n: " started with:" * (n // 14),
    "DELETE": lambda n: "DELETE " * (n // 7),
    "FROM": lambda n: "FROM " * (n // 5),
    "SELECT": lambda n: "SELECT " * (n // 7),
    "ON": lambda n: "ON " * (n // 3),
    "AS (": lambda n: "AS ( " * (n // 5),
    ") DELETE": lambda n: ") DELETE " * (n // 9),
    "DEFINER=": lambda n: "DEFINER=x " * (n // 10),
    "BEGIN": lambda n: "BEGIN " * (n // 6),
    "x TO y": lambda n: "x TO " * (n // 5),
    "COMMENT": lambda n: "COMMENT '' " * (n // 11),
    "LOGS": lambda n: "LOGS " * (n // 5),
    "FOR": lambda n: "FOR " * (n // 4),
    "INTO": lambda n: "INTO @a " * (n // 8),
    "key = value": lambda n: "a=1 " * (n // 4),
    "ISO times": lambda n: "2023-01-01T00:00:00 " * (n // 20),
    "time-ish": lambda n: "20230101 12:00:00," * (n // 18),
    "json keys": lambda n: '"connection_id" ' * (n // 16),
    "xml attrs": lambda n: 'a="b" ' * (n // 6),
    "xml names": lambda n: "a=\x00 " * (n // 4),
    "entities": lambda n: "&#" * (n // 2),
    "brackets": lambda n: "[" * n,
    "lt": lambda n: "<" * n,
    "user hosts": lambda n: "root[root] @ " * (n // 13),
}


def patterns() -> list[tuple[str, re.Pattern[str] | re.Pattern[bytes], tuple[str, ...]]]:
    """(name, pattern, the methods the code calls on it) for each module-level pattern.

    A pattern only ever matched at the start of its subject is tried with `match`; one
    used to search, substitute, find all, or handed to a helper (which may search) is
    tried with `search`, where every start position counts.
    """
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        source = Path(module.__file__ or "").read_text()
        for attr, value in vars(module).items():
            if not isinstance(value, re.Pattern):
                continue
            used = set(re.findall(rf"\b{attr}\.(\w+)", source))
            handed_on = re.search(rf"(?<!`)\b{attr}\b(?![.\w])(?!\s*=\s*re\.compile)", source) is not None
            methods = ("match",) if used <= {"match", "fullmatch"} and not handed_on else ("search",)
            found.append((f"{name}.{attr}", value, methods))
    return found


def subject(pattern: re.Pattern[str] | re.Pattern[bytes], text: str) -> str | bytes:
    return text.encode("utf-8") if isinstance(pattern.pattern, bytes) else text


def cost(pattern: re.Pattern[str] | re.Pattern[bytes], text: str, method: str) -> float:
    s = subject(pattern, text)
    run = getattr(pattern, method)
    start = time.process_time()
    if method == "finditer":
        for _ in run(s):
            pass
    else:
        run(s)
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1600)
    ap.add_argument("--limit", type=float, default=0.0015, help="CPU seconds at --size that make a suspect")
    ap.add_argument("--only", default="", help="audit only the patterns whose name holds this")
    args = ap.parse_args()
    worst: dict[str, tuple[float, float, str, str, str]] = {}
    for name, pattern, methods in patterns():
        if args.only not in name:
            continue
        for prefix in PREFIXES:
            for body_name, body in BODIES.items():
                for method in methods:
                    seconds = cost(pattern, prefix + body(args.size), method)
                    if seconds < args.limit:
                        continue
                    # Growth from a quarter of the size: x4 linear, x16 quadratic, x64 cubic.
                    small = min(cost(pattern, prefix + body(args.size // 4), method) for _ in range(3))
                    seconds = min(seconds, cost(pattern, prefix + body(args.size), method))
                    growth = seconds / max(small, 1e-6)
                    if growth > worst.get(name, (0.0,))[0]:
                        worst[name] = (growth, seconds, prefix, body_name, method)
    suspects = {k: v for k, v in worst.items() if v[0] > 8}
    print(f"{len(suspects)} pattern(s) grow faster than the text (x4 is linear) at {args.size} characters")
    for name, (growth, seconds, prefix, body_name, method) in sorted(suspects.items()):
        print(f"{name}: {method} {prefix!r} + {body_name}: {seconds:.4f}s, growth x{growth:.1f} for x4")


if __name__ == "__main__":
    main()
