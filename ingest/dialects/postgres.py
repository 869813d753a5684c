"""PostgreSQL statements, as pgAudit and the server log write them: destructive, anti-forensic.

Pure: no Django. sqlglot's `postgres` dialect reads the statements it knows (the verb, the
relations, ALTER TABLE's actions); what it does not (ALTER SYSTEM, DROP EXTENSION, and
anything it refuses) is read by anchored, linear patterns over the text with its comments
and string literals set aside. Never raises.

- destructive: DELETE, UPDATE, TRUNCATE, MERGE, DROP of what holds data (TABLE, SCHEMA,
  DATABASE, MATERIALIZED VIEW, OWNED...), ALTER ... DROP (a column, a constraint, a partition
  detached and dropped later is not: DETACH is no DROP).
- anti_forensic: `ALTER SYSTEM`, `ALTER DATABASE|ROLE ... SET` or `SET` of pgaudit.* or
  log_statement and the other log_* settings, `RESET` of pgaudit.log or log_statement (pgAudit
  never logs the `SET pgaudit.log = 'none'` itself: it logs after the statement, with the
  new setting; the RESET that ends the blind spot is what the log shows), `pg_rotate_logfile()`
  anywhere, `DROP EXTENSION pgaudit`; and the server's reload line `parameter "pgaudit.log"
  changed to ...` (a Config record, see `config_change`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ErrorLevel

__all__ = ["Verdict", "classify", "clear_cache", "config_change", "plain_shape", "shape"]

MAX_PARSE = 64 * 1024  # longer texts are read by the patterns only (sqlglot is not linear)

# Comments, string literals ('', E'', $tag$...$tag$) and quoted names, in one linear pass;
# strings become '' so that nothing inside them is read as SQL; quoted names stay as written.
_MASK_RE = re.compile(
    r"""
      (?P<name>"(?:[^"]|"")*+")                 # a quoted name: kept as it is
    | --[^\n]*+
    | /\*(?:[^*]|\*(?!/))*+\*/
    | [Ee]?'(?:[^'\\]|''|\\.)*+'
    | \$(?P<tag>[A-Za-z_]?\w{0,62})\$
    """,
    re.X | re.S,
)
_WORD_RE = re.compile(r"[A-Za-z_][\w$]*")
_DATA_OBJECTS = frozenset(
    {"TABLE", "SCHEMA", "DATABASE", "MATERIALIZED", "OWNED", "VIEW", "SEQUENCE", "FOREIGN", "TABLESPACE"}
)
_LOG_SETTING_RE = re.compile(
    r"""\b(?:pgaudit\.\w+|log_statement|log_min_messages|log_min_error_statement|log_destination
    |log_directory|log_filename|logging_collector|log_connections|log_disconnections
    |log_line_prefix|shared_preload_libraries|log_rotation_age|log_rotation_size
    |log_truncate_on_rotation)\b""",
    re.I | re.X,
)
_ROTATE_RE = re.compile(r"\bpg_rotate_logfile(?:_old)?\s*\(", re.I)
_DROP_PGAUDIT_RE = re.compile(r"\ADROP\s+EXTENSION\s+(?:IF\s+EXISTS\s+)?(?:[\w\",\s]*\W)?\"?pgaudit\b", re.I)
_ALTER_DROP_RE = re.compile(r"\bDROP\s+(?!DEFAULT\b|NOT\s+NULL\b|EXPRESSION\b|IDENTITY\b)", re.I)


class _QuietParser(Postgres.Parser):  # type: ignore[misc,name-defined]  # sqlglot's dialect classes are untyped
    def _warn_unsupported(self) -> None:
        # A statement sqlglot keeps as an opaque Command is read by our patterns; a warning
        # for each would flood a worker's log.
        return


_DIALECT = Postgres()


def _parse(sql: str) -> exp.Expression | None:
    """One sqlglot tree, or None when sqlglot cannot read `sql` (or keeps it as a Command)."""
    try:
        parser = _QuietParser(dialect=_DIALECT, error_level=ErrorLevel.RAISE)
        trees = parser.parse(_DIALECT.tokenize(sql), sql)
    except Exception:  # ParseError, TokenError, RecursionError, a bug: all mean "read by patterns"
        return None
    if len(trees) != 1 or trees[0] is None or isinstance(trees[0], exp.Command):
        return None
    return trees[0]


@dataclass(frozen=True, slots=True)
class Verdict:
    statement_type: str  # upper-case verb phrase: DELETE, DROP TABLE, ALTER TABLE, SET...
    destructive: bool
    flags: frozenset[str]  # "anti_forensic", "unparsed"
    tables: tuple[str, ...]  # relations as written (schema.table), from the text


def _masked(sql: str) -> str:
    """The text with comments removed and literals emptied (dollar quotes to their end tag)."""
    out: list[str] = []
    pos = 0
    n = len(sql)
    while pos < n:
        m = _MASK_RE.search(sql, pos)
        if m is None:
            out.append(sql[pos:])
            break
        out.append(sql[pos : m.start()])
        if m["name"] is not None:
            out.append(m["name"])
            pos = m.end()
            continue
        if m["tag"] is not None:
            close = sql.find(m.group(), m.end())
            pos = n if close < 0 else close + len(m.group())
            out.append("''")
            continue
        out.append(" " if m.group().startswith(("--", "/*")) else "''")
        pos = m.end()
    return "".join(out)


def _type(words: list[str]) -> str:
    if not words:
        return ""
    first = words[0]
    if first in ("CREATE", "DROP", "ALTER") and len(words) > 1:
        second = words[1]
        if second in ("MATERIALIZED", "FOREIGN") and len(words) > 2:
            return f"{first} {second} {words[2]}"
        if second == "OR" and len(words) > 3:  # CREATE OR REPLACE FUNCTION
            return f"{first} {words[3]}"
        if second in ("UNIQUE", "TEMP", "TEMPORARY", "UNLOGGED") and len(words) > 2:
            return f"{first} {words[2]}"
        return f"{first} {second}"
    if first == "TRUNCATE":
        return "TRUNCATE"
    if first == "WITH":
        for word in words[1:]:
            if word in ("DELETE", "UPDATE", "INSERT", "MERGE"):
                return word
        return "SELECT"
    return first


# Verdicts already worked out. A log repeats its statements: verbatim (an application's
# prepared `$1` text), or with other literals. `_EXACT` answers a verbatim repeat with one dict
# lookup; `_SHAPES` answers a statement of the same shape (comments gone, string literals
# emptied, numbers outside quoted names made `?`, whitespace folded: nothing a verdict reads),
# so sqlglot runs once a shape. Both are bounded in entries and characters of keys, and start
# again empty when full (a log's working set of shapes is small).
_CACHE_ENTRIES = 20_000
_CACHE_CHARS = 16 << 20
_EXACT_MAX_LEN = 1024  # (at most 20 MB of verbatim keys)
_EXACT: dict[tuple[str, tuple[str, ...]], Verdict] = {}
_SHAPES: dict[tuple[str, tuple[str, ...]], Verdict] = {}
_cache_chars = [0]
# A number outside a quoted name ("t 1" stays), as a whole word: `t1` and `$1`'s name stay.
_NUMBER_RE = re.compile(r'"(?:[^"]|"")*+"|(?<![\w$.])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?![\w$])')
_SPACE_RE = re.compile(r"\s+")


# A number as _NUMBER_RE takes it, in a text without quoted names. (Its first digit first, and
# the lookbehind over it and the character before: a pattern that begins with one character
# class is searched for by that class, in C, and is tried only where a digit stands; with a
# lookahead or a repeat first, the whole pattern was tried at every character, half again the
# time on pgbench's statements.)
_PLAIN_NUMBER_RE = re.compile(r"\d(?<![\w$.]\d)\d*(?:\.\d*)?(?:[eE][+-]?\d+)?(?![\w$])")


def plain_shape(sql: str) -> str | None:
    """`shape(sql)` by str methods, for the plain text most statements are: no quoted name, no
    dollar quote, no backslash, no comment (nor `#`, which starts one for the fingerprint:
    ingest.postgres keys fingerprints by this shape), and string literals without an escaped or
    doubled quote or an E prefix, so that every other piece between quotes is a string. None
    for any other text (masked_shape reads it)."""
    if '"' in sql or "$" in sql or "\\" in sql or "--" in sql or "/*" in sql or "#" in sql:
        return None
    if "'" in sql:
        if "''" in sql or "e'" in sql or "E'" in sql:
            return None
        pieces = sql.split("'")
        if not len(pieces) & 1:  # a quote left open: the pattern reads it as no string
            return None
        sql = "''".join(pieces[::2])
    return " ".join(_PLAIN_NUMBER_RE.sub("?", sql).split())


def shape(sql: str) -> str:
    """The text a verdict depends on: comments gone, literals `''` and `?`, spaces folded."""
    plain = plain_shape(sql)
    return plain if plain is not None else masked_shape(sql)


def masked_shape(sql: str) -> str:
    """`shape(sql)` for any text: by the pattern of comments, literals and quoted names."""
    bare = _masked(sql)
    bare = _NUMBER_RE.sub(lambda m: m.group() if m.group()[0] == '"' else "?", bare)
    return _SPACE_RE.sub(" ", bare).strip()


def clear_cache() -> None:
    """Forget every verdict (tests and benchmarks)."""
    _EXACT.clear()
    _SHAPES.clear()
    _cache_chars[0] = 0


def classify(sql: str, commands: Sequence[str] = ()) -> Verdict:
    """The verdict on one statement. `commands`: pgAudit's COMMAND of each of its entries
    (sub-statements too): a sub-statement that deletes makes the whole statement destructive,
    so a `SELECT f()` whose function deletes is."""
    exact = (sql, tuple(commands))
    known = _EXACT.get(exact)
    if known is not None:
        return known
    try:
        if len(sql) > MAX_PARSE:  # read by the patterns only: not worth a cache entry
            return _classify(sql, commands)
        key = (shape(sql), exact[1])
        verdict = _SHAPES.get(key)
        if verdict is None:
            verdict = _classify(sql, commands)
            if len(_SHAPES) >= _CACHE_ENTRIES or _cache_chars[0] > _CACHE_CHARS:
                clear_cache()
            _SHAPES[key] = verdict
            _cache_chars[0] += len(key[0])
    except Exception:  # a bug of ours on a hostile text must not stop an ingest
        return Verdict("UNKNOWN", False, frozenset({"unparsed"}), ())
    if len(sql) <= _EXACT_MAX_LEN:
        if len(_EXACT) >= _CACHE_ENTRIES:
            _EXACT.clear()
        _EXACT[exact] = verdict
    return verdict


def _classify(sql: str, commands: Sequence[str]) -> Verdict:
    bare = _masked(sql).strip()
    words = [w.upper() for w in _WORD_RE.findall(bare[:512])]
    statement_type = _type(words)
    flags: set[str] = set()
    tables: list[str] = []
    destructive = False
    tree = _parse(sql) if len(sql) <= MAX_PARSE else None
    if tree is not None:
        tables = [".".join(p for p in (t.db, t.name) if p) for t in tree.find_all(exp.Table) if t.name]
        if tree.find(exp.Delete, exp.Update, exp.Merge, exp.TruncateTable) is not None:
            destructive = True  # (also inside a CTE: WITH gone AS (DELETE ...) SELECT ...)
        elif isinstance(tree, exp.Drop):
            destructive = str(tree.args.get("kind") or "").upper() in _DATA_OBJECTS
        elif isinstance(tree, exp.Alter):
            destructive = any(isinstance(a, exp.Drop) for a in tree.args.get("actions") or ())
    else:
        destructive = _loose_destructive(words, bare)
    for command in commands:
        verb = command.upper()
        if verb in ("DELETE", "UPDATE", "MERGE", "TRUNCATE TABLE") or (
            verb.startswith("DROP ") and verb.split()[1] in _DATA_OBJECTS
        ):
            destructive = True
    if _anti_forensic(words, bare):
        flags.add("anti_forensic")
    return Verdict(statement_type, destructive, frozenset(flags), tuple(dict.fromkeys(tables)))


def _loose_destructive(words: list[str], bare: str) -> bool:
    if not words:
        return False
    first = words[0]
    if first in ("DELETE", "UPDATE", "TRUNCATE", "MERGE"):
        return True
    if first == "WITH":
        return any(w in ("DELETE", "UPDATE", "MERGE") for w in words)
    if first == "DROP":
        return len(words) > 1 and words[1] in _DATA_OBJECTS
    if first == "ALTER" and len(words) > 1 and words[1] in ("TABLE", "FOREIGN", "MATERIALIZED"):
        return _ALTER_DROP_RE.search(bare) is not None
    return False


def _anti_forensic(words: list[str], bare: str) -> bool:
    if _ROTATE_RE.search(bare):
        return True
    if not words:
        return False
    first = words[0]
    if first in ("SET", "RESET") or (first == "ALTER" and len(words) > 1):
        if first == "ALTER" and words[1] not in ("SYSTEM", "DATABASE", "ROLE", "USER"):
            return False
        return _LOG_SETTING_RE.search(bare) is not None
    return first == "DROP" and _DROP_PGAUDIT_RE.match(bare) is not None


_CONFIG_RE = re.compile(
    r'parameter "(?P<name>[^"\n]{1,200})"'
    r' (?:changed to "(?P<value>[^\n]{0,4096})"|removed from configuration file, reset to default)\Z'
)


def config_change(message: str) -> bool:
    """Whether the server's reload line (`parameter "x" changed to "y"`, or `... removed from
    configuration file, reset to default`) weakens the logs: a pgaudit.* or log_* setting
    changed (to anything: the line says what the server now logs)."""
    m = _CONFIG_RE.match(message)
    return m is not None and _LOG_SETTING_RE.fullmatch(m["name"]) is not None
