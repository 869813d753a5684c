"""What one SQL statement does: its type, tables, whether it destroys data, flags.

`analyse(text, key)` returns an `Analysis` that does not depend on the session's current
database (tables are `(db or None, name)` pairs), so one analysis serves every session that runs
the same statement shape; `literal_sensitive` ones must not be shared by key. How a statement is
read: docs/architecture.md, "Classifying a statement".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from enum import Enum

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import ErrorLevel

from ingest.sql.lexer import DOUBLE_QUOTED, SINGLE_QUOTED, normalize_key, strip_comments, unquote_string

Name = tuple[str | None, str]
"""A table as written: (database or None when unqualified, table). "*" is "all tables"."""

# Parsing a statement this long costs more than the answer is worth; such
# statements (mysqldump extended INSERTs, huge IN lists) are read by keywords.
MAX_PARSE = 64 * 1024
# Stored program bodies, PREPARE strings and SET STATEMENT ... FOR nest statements.
_MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class Analysis:
    statement_type: str
    tables: tuple[Name, ...] = ()
    targets: tuple[Name, ...] = ()  # tables the statement writes (subset of tables)
    destructive: bool = False
    flags: frozenset[str] = frozenset()
    literal_sensitive: bool = False


# --- names -----------------------------------------------------------------

# One identifier: backtick-quoted (doubled backtick inside) or bare (MySQL
# allows $ and any Unicode letter or digit). Possessive: a name is read one way only,
# so a search that fails after a long name does not try every shorter one.
_NAME = r"(?:`(?:[^`]|``)++`|[\w$]++)"
_QNAME = rf"{_NAME}(?:\s*\.\s*{_NAME})?"
_NAME_RE = re.compile(_NAME)
_FIRST_NAME_RE = re.compile(rf"^\s*(?P<name>{_QNAME})")
_QNAME_LIST_RE = re.compile(rf"\s*({_QNAME}(?:\s*,\s*{_QNAME})*)")

# Words a loose regex may pick up where a table name was expected.
_NOT_NAMES = frozenset(
    {
        "SELECT",
        "WHERE",
        "SET",
        "VALUES",
        "VALUE",
        "ON",
        "USING",
        "AS",
        "LIMIT",
        "ORDER",
        "GROUP",
        "PARTITION",
        "IGNORE",
        "LOW_PRIORITY",
        "QUICK",
        "DELAYED",
        "HIGH_PRIORITY",
        "INTO",
        "FROM",
        "JOIN",
        "TABLE",
        "IF",
        "EXISTS",
        "NOT",
        "DUAL",
        "LATERAL",
        "OUTFILE",
        "DUMPFILE",
        "WITH",
        "LOCAL",
        "SKIP",
        "NOWAIT",
    }
)


def _unquote(name: str) -> str:
    if name.startswith("`"):
        return name[1:-1].replace("``", "`")
    return name


def _pair(qname: str) -> Name:
    parts = [_unquote(p) for p in _NAME_RE.findall(qname)]
    if len(parts) >= 2:
        return (parts[-2], parts[-1])
    return (None, parts[0] if parts else qname)


def _pairs(qname_list: str) -> list[Name]:
    """`a, db.b, `c`` -> pairs; stops at the first thing that is not a name."""
    m = _QNAME_LIST_RE.match(qname_list)
    if not m:
        return []
    return [_pair(q) for q in re.findall(_QNAME, m.group(1)) if q.upper() not in _NOT_NAMES]


def _first(pattern: re.Pattern[str], key: str) -> Name | None:
    m = pattern.search(key)
    return _pair(m.group("name")) if m else None


# --- sqlglot ---------------------------------------------------------------


class _QuietMySQLParser(MySQL.Parser):  # type: ignore[misc,valid-type]  # mypy takes MySQL.Parser for a variable
    def _warn_unsupported(self) -> None:
        # sqlglot logs a warning for every statement it can only keep as an
        # opaque Command; those are ours to read by keywords, and a busy log
        # would flood the worker's log with them.
        return


_DIALECT = MySQL()


def _parse(sql: str) -> exp.Expression | None:
    """One sqlglot tree for `sql`, or None when sqlglot cannot make sense of it."""
    try:
        trees = _QuietMySQLParser(dialect=_DIALECT, error_level=ErrorLevel.RAISE).parse(
            _DIALECT.tokenize(sql), sql
        )
    except Exception:
        # Log text is hostile and sqlglot is a large parser: ParseError, TokenError,
        # RecursionError on deep nesting, or a bug must all mean "read by keywords".
        return None
    if len(trees) != 1 or trees[0] is None or isinstance(trees[0], exp.Command):
        return None
    return trees[0]


# MySQL modifiers sqlglot does not know (or mistakes for a table name:
# `DELETE LOW_PRIORITY FROM t` comes back as a table LOW_PRIORITY).
_INSERT_HEAD_RE = re.compile(
    r"^\s*(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE)\b)*(?:\s+INTO\b)?", re.I
)
_DELETE_HEAD_RE = re.compile(r"^\s*DELETE(?:\s+(?:LOW_PRIORITY|QUICK|IGNORE)\b)*", re.I)
_UPDATE_HEAD_RE = re.compile(r"^\s*UPDATE(?:\s+(?:LOW_PRIORITY|IGNORE)\b)*", re.I)
# `DELETE t1.*, t2.* FROM ...`: the `.*` form of multi-table delete targets. Linear: the
# spaces after DELETE are taken once (possessive), and the targets run to the first
# " FROM" by a scan that looks one word ahead at each character, never back (a lazy
# `.*?` before `\s+FROM` rescanned every run of spaces: cubic, 67 s for 4,000 spaces).
_DELETE_TARGETS_RE = re.compile(r"^(DELETE\s++)(?!FROM\b)((?:(?!\sFROM\b).)*+)(\s+FROM\b)", re.I | re.S)
# SELECT ... INTO OUTFILE/DUMPFILE/@var: where the result goes, not a table.
_SELECT_INTO_RE = re.compile(
    rf"""
    \bINTO\s+
    (?: (?:OUTFILE|DUMPFILE) \s+ (?:{SINGLE_QUOTED}|{DOUBLE_QUOTED})
        (?: \s+ (?: CHARACTER\s+SET\s+\w+ | FIELDS | COLUMNS | LINES
                  | (?:OPTIONALLY\s+)?ENCLOSED\s+BY\s+(?:{SINGLE_QUOTED}|{DOUBLE_QUOTED})
                  | (?:TERMINATED|ESCAPED|STARTING)\s+BY\s+(?:{SINGLE_QUOTED}|{DOUBLE_QUOTED}) ) )*
      | @{{0,2}}[\w$.`]+ (?:\s*,\s*@{{0,2}}[\w$.`]+)*      # INTO @a, @b (or a routine's variables)
    )
    """,
    re.X | re.I | re.S,
)


def _for_sqlglot(verb: str, bare: str) -> str:
    if verb in ("INSERT", "REPLACE"):
        return _INSERT_HEAD_RE.sub("INSERT INTO", bare, count=1)
    if verb == "DELETE":
        bare = _DELETE_HEAD_RE.sub("DELETE", bare, count=1)
        return _DELETE_TARGETS_RE.sub(lambda m: m[1] + re.sub(r"\.\s*\*", "", m[2]) + m[3], bare, count=1)
    if verb == "UPDATE":
        return _UPDATE_HEAD_RE.sub("UPDATE", bare, count=1)
    if "INTO" in bare.upper():
        return _SELECT_INTO_RE.sub(" ", bare)
    return bare


def _tree_tables(tree: exp.Expression) -> tuple[list[Name], dict[str, Name]]:
    """Real tables in `tree` and the alias -> table map; CTE names and DUAL are not tables."""
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE) if cte.alias}
    delete_targets = {id(t) for t in tree.args.get("tables") or ()} if isinstance(tree, exp.Delete) else set()
    tables: list[Name] = []
    aliases: dict[str, Name] = {}
    for t in tree.find_all(exp.Table):
        # Table functions (JSON_TABLE) have no identifier; DELETE's target list holds
        # names or aliases and is resolved by the caller.
        if id(t) in delete_targets or not isinstance(t.this, exp.Identifier) or not t.name:
            continue
        db = t.db or None
        if db is None and (t.name.lower() in ctes or t.name.lower() == "dual"):
            continue
        pair = (db, t.name)
        tables.append(pair)
        if t.alias:
            aliases[t.alias] = pair
    return tables, aliases


def _resolve(db: str | None, name: str, aliases: dict[str, Name]) -> Name:
    """An unqualified name that is an alias means the aliased table."""
    if db is None:
        if name in aliases:
            return aliases[name]
        for alias, pair in aliases.items():
            if alias.lower() == name.lower():
                return pair
    return (db, name)


def _table_refs(node: exp.Expression | None) -> list[exp.Table]:
    """The tables of an UPDATE/DELETE table reference: the first and its joins."""
    if not isinstance(node, exp.Table):
        return []
    return [node] + [j.this for j in node.args.get("joins") or () if isinstance(j.this, exp.Table)]


# --- WHERE: is it always true? -----------------------------------------------


class _Unknown(Enum):
    """A one-member enum rather than a bare object(), so that `value is _UNKNOWN` narrows types."""

    UNKNOWN = "unknown"


_UNKNOWN = _Unknown.UNKNOWN
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)
_LEADING_NUMBER_RE = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _as_number(value: str | float) -> float:
    if isinstance(value, str):
        # MySQL reads the leading number of a string in numeric context: '1abc' is 1, 'a' is 0.
        m = _LEADING_NUMBER_RE.match(value)
        return float(m.group()) if m else 0.0
    return float(value)


class _WhereTruth:
    """Three-valued evaluation of a WHERE clause: True (always), False (never), None (depends on rows).

    `used_literals` records that a literal's value decided part of the answer,
    which makes the result depend on more than the key.
    """

    def __init__(self) -> None:
        self.used_literals = False

    def truth(self, node: exp.Expression) -> bool | None:
        if isinstance(node, exp.Paren):
            return self.truth(node.this)
        if isinstance(node, exp.And):
            left, right = self.truth(node.this), self.truth(node.expression)
            if left is False or right is False:
                return False
            return True if left and right else None
        if isinstance(node, exp.Or):
            left, right = self.truth(node.this), self.truth(node.expression)
            if left is True or right is True:
                return True
            return False if left is False and right is False else None
        if isinstance(node, exp.Not):
            inner = self.truth(node.this)
            return None if inner is None else not inner
        if isinstance(node, _COMPARISONS):
            return self._compare(node)
        value = self.value(node)
        if value is _UNKNOWN:
            return None
        self.used_literals = True
        return value is not None and _as_number(value) != 0

    def _compare(self, node: exp.Expression) -> bool | None:
        left, right = node.this, node.expression
        if isinstance(left, exp.Column) and left == right:
            # `id = id` holds for every row whose id is not NULL: as good as no WHERE.
            return isinstance(node, (exp.EQ, exp.GTE, exp.LTE, exp.NullSafeEQ))
        a, b = self.value(left), self.value(right)
        if a is _UNKNOWN or b is _UNKNOWN:
            return None
        self.used_literals = True
        if isinstance(node, exp.NullSafeEQ):
            return a == b if a is None or b is None else self._order(a, b) == 0
        if a is None or b is None:
            return False  # a comparison with NULL is never true
        order = self._order(a, b)
        return {
            exp.EQ: order == 0,
            exp.NEQ: order != 0,
            exp.GT: order > 0,
            exp.GTE: order >= 0,
            exp.LT: order < 0,
            exp.LTE: order <= 0,
        }[type(node)]

    @staticmethod
    def _order(a: str | float, b: str | float) -> int:
        if isinstance(a, str) and isinstance(b, str):
            # Default collations ignore case and trailing spaces ('a' = 'A ').
            s, t = a.rstrip(" ").casefold(), b.rstrip(" ").casefold()
            return (s > t) - (s < t)
        x, y = _as_number(a), _as_number(b)
        return (x > y) - (x < y)

    def value(self, node: exp.Expression) -> str | float | _Unknown | None:
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return node.this
            try:
                return float(node.this)
            except ValueError:
                return _UNKNOWN
        if isinstance(node, exp.Boolean):
            return 1.0 if node.this else 0.0
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Neg):
            inner = self.value(node.this)
            return -_as_number(inner) if inner is not _UNKNOWN and inner is not None else inner
        return _UNKNOWN


# --- data statements -------------------------------------------------------


def _from_tree(tree: exp.Expression, verb: str, flags: set[str]) -> Analysis:
    tables, aliases = _tree_tables(tree)
    sensitive = False
    targets: list[Name] = []
    destructive = False
    if isinstance(tree, exp.Delete):
        statement_type, destructive = "DELETE", True
        named = tree.args.get("tables")
        refs = _table_refs(tree.this)
        if named:  # DELETE t1, t2 FROM t1 JOIN t2 ...
            targets = [_resolve(t.db or None, t.name, aliases) for t in named if isinstance(t, exp.Table)]
            flags.add("multi_table")
        else:  # DELETE FROM t ...; DELETE FROM t1, t2 USING ...
            targets = [(t.db or None, t.name) for t in refs]
            if tree.args.get("using") or len(refs) > 1:
                flags.add("multi_table")
    elif isinstance(tree, exp.Update):
        statement_type, destructive = "UPDATE", True
        refs = _table_refs(tree.this)
        ref_tables = [(t.db or None, t.name) for t in refs]
        if len(refs) > 1:
            flags.add("multi_table")
        for assignment in tree.expressions:
            column = assignment.this if isinstance(assignment, exp.EQ) else None
            if isinstance(column, exp.Column) and column.table:
                targets.append(_resolve(column.db or None, column.table, aliases))
            else:
                # An unqualified column in a multi-table UPDATE belongs to whichever
                # table has it; without the schema, every joined table may be written.
                targets.extend(ref_tables)
    elif isinstance(tree, exp.Insert):
        statement_type = "REPLACE" if verb == "REPLACE" else "INSERT"
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if isinstance(target, exp.Table) and target.name:
            targets = [(target.db or None, target.name)]
        conflict = tree.args.get("conflict")
        on_duplicate_update = bool(conflict is not None and conflict.args.get("duplicate"))
        destructive = statement_type == "REPLACE" or on_duplicate_update
    else:
        statement_type = "SELECT"
    if isinstance(tree, (exp.Delete, exp.Update)):
        where = tree.args.get("where")
        if where is None:
            # A LIMIT or a join condition still picks rows without looking at their
            # values: `DELETE FROM t LIMIT 10` is as blind as `DELETE FROM t`.
            flags.add("no_where")
        else:
            judge = _WhereTruth()
            if judge.truth(where.this) is True:
                flags.add("no_where")
            sensitive = judge.used_literals
    return Analysis(
        statement_type,
        tables=tuple(tables) + tuple(t for t in targets if t not in tables),
        targets=tuple(dict.fromkeys(targets)),
        destructive=destructive,
        flags=frozenset(flags),
        literal_sensitive=sensitive,
    )


_STOP_ALIAS = (
    r"(?!(?:WHERE|JOIN|INNER|LEFT|RIGHT|CROSS|NATURAL|STRAIGHT_JOIN|OUTER|ON|USING|SET|VALUES|VALUE|SELECT"
    r"|ORDER|GROUP|LIMIT|HAVING|WINDOW|FOR|LOCK|UNION|EXCEPT|INTERSECT|PARTITION|USE|FORCE|IGNORE|INTO"
    r"|FROM|PROCEDURE|RETURNING)\b)"
)
# Fallback when sqlglot fails: names right after the keywords that introduce
# tables. FOR UPDATE and ON DUPLICATE KEY UPDATE are not followed by tables.
_LOOSE_TABLES_RE = re.compile(
    rf"""
    (?: \b(?:FROM|JOIN|INTO|TABLE|USING) | (?<!\bFOR\s)(?<!\bKEY\s)\bUPDATE(?:\s+(?:LOW_PRIORITY|IGNORE))* )
    \s+
    (?P<list> {_QNAME} (?:\s+(?:AS\s+)?{_STOP_ALIAS}{_NAME})?
              (?:\s*,\s*{_QNAME}(?:\s+(?:AS\s+)?{_STOP_ALIAS}{_NAME})?)* )
    """,
    re.X | re.I,
)
_ITEM_RE = re.compile(rf"\s*(?P<name>{_QNAME})(?:\s+(?:AS\s+)?(?P<alias>{_NAME}))?")
_WHERE_RE = re.compile(r"\bWHERE\b", re.I)
_ODKU_RE = re.compile(r"\bON\s+DUPLICATE\s+KEY\s+UPDATE\b", re.I)
# As _DELETE_TARGETS_RE: modifiers and spaces taken once, the list up to the first " FROM".
_DELETE_NAMED_RE = re.compile(
    r"^DELETE(?:\s++(?:LOW_PRIORITY|QUICK|IGNORE)\b)*+\s++(?!FROM\b)(?P<list>(?:(?!\sFROM\b).)*+)\s+FROM\b",
    re.I,
)


def _loose(key: str, verb: str, flags: set[str]) -> Analysis:
    """Read a data statement sqlglot could not parse with regexes over its key."""
    flags.add("unparsed")
    tables: list[Name] = []
    aliases: dict[str, Name] = {}
    first_after_verb: Name | None = None
    for m in _LOOSE_TABLES_RE.finditer(key):
        for item in m.group("list").split(","):
            im = _ITEM_RE.match(item)
            if not im or im.group("name").upper() in _NOT_NAMES:
                continue
            pair = _pair(im.group("name"))
            tables.append(pair)
            first_after_verb = first_after_verb or pair
            if im.group("alias"):
                aliases[_unquote(im.group("alias"))] = pair
    targets: list[Name] = []
    destructive = verb in ("DELETE", "UPDATE", "REPLACE")
    if verb == "DELETE":
        named = _DELETE_NAMED_RE.match(key)
        if named:
            targets = [_resolve(db, n, aliases) for db, n in _pairs(re.sub(r"\.\s*\*", "", named["list"]))]
            flags.add("multi_table")
        elif first_after_verb:
            targets = [first_after_verb]
    elif verb in ("UPDATE", "INSERT", "REPLACE") and first_after_verb:
        targets = [first_after_verb]
    if verb in ("DELETE", "UPDATE") and not _WHERE_RE.search(key):
        flags.add("no_where")
    if verb == "INSERT" and _ODKU_RE.search(key):
        destructive = True
    statement_type = verb if verb in ("DELETE", "UPDATE", "INSERT", "REPLACE") else "SELECT"
    return Analysis(
        statement_type,
        tables=tuple(dict.fromkeys(tables + targets)),
        targets=tuple(dict.fromkeys(targets)),
        destructive=destructive,
        flags=frozenset(flags),
    )


# --- the statement being analysed --------------------------------------------


class _Stmt:
    __slots__ = ("_bare", "depth", "full", "key", "no_parser", "text", "verb", "words")

    def __init__(
        self, text: str, key: str, words: list[str], depth: int, full: str, *, no_parser: bool = False
    ) -> None:
        self.text = text
        self.key = key
        self.verb = words[0]
        self.words = words  # the first few words of the key, upper-case
        self.depth = depth
        self.full = full  # the whole statement when `text` is a truncated head
        self.no_parser = no_parser or self.truncated
        self._bare: str | None = None

    @property
    def truncated(self) -> bool:
        return len(self.full) > len(self.text)

    def parse(self, sql: str) -> exp.Expression | None:
        return None if self.no_parser else _parse(sql)

    @property
    def bare(self) -> str:
        if self._bare is None:
            self._bare = strip_comments(self.text)
        return self._bare

    def word(self, i: int) -> str:
        return self.words[i] if len(self.words) > i else ""


_Handler = Callable[[_Stmt], Analysis]


def _parse_data(st: _Stmt) -> Analysis:
    flags: set[str] = set()
    tree = st.parse(_for_sqlglot(st.verb, st.bare))
    if tree is None:
        if st.truncated:
            flags.add("truncated")
        verb, ctes = st.verb, set()
        if verb == "WITH":
            # WITH ... DELETE/UPDATE (MySQL 8): the statement after the last CTE decides,
            # and the CTEs' names are not tables.
            main = _AFTER_CTES_RE.search(st.key)
            verb = main.group(1).upper() if main else "SELECT"
            ctes = {(None, _unquote(name)) for name in _CTE_NAME_RE.findall(st.key)}
        analysis = _loose(st.key, verb, flags)
        if ctes:
            analysis = replace(
                analysis,
                tables=tuple(t for t in analysis.tables if t not in ctes),
                targets=tuple(t for t in analysis.targets if t not in ctes),
            )
        if st.truncated and st.verb == "INSERT" and _ODKU_RE.search(st.full[-MAX_PARSE:]):
            # The ON DUPLICATE KEY UPDATE of a huge INSERT sits after its values.
            analysis = replace(analysis, destructive=True)
        return analysis
    return _from_tree(tree, st.verb, flags)


_AFTER_CTES_RE = re.compile(
    r"\)\s*(DELETE|UPDATE|SELECT)\b(?!.*\)\s*(?:DELETE|UPDATE|SELECT)\b)", re.I | re.S
)
_CTE_NAME_RE = re.compile(rf"(?:\bWITH(?:\s+RECURSIVE)?|,)\s*({_NAME})\s*(?:\([^()]*\)\s*)?AS\s*\(", re.I)
_HAS_FROM_RE = re.compile(r"\bFROM\b", re.I)


def _query(st: _Stmt) -> Analysis:
    """SELECT, TABLE, VALUES and WITH (whose tree may turn out to be a DELETE or UPDATE)."""
    if st.verb == "VALUES" or (st.verb == "SELECT" and not _HAS_FROM_RE.search(st.key)):
        return Analysis("SELECT")  # SELECT 1, SELECT @@version, SELECT NOW(): no tables
    return _parse_data(st)


# INSERT ... VALUES/SET into one table needs no parser: the table is the name
# after INTO. Anything with a SELECT or ON DUPLICATE KEY UPDATE is parsed.
_SIMPLE_INSERT_RE = re.compile(
    rf"""
    ^(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*
    (?:\s+INTO)?\s+
    (?P<name>{_QNAME})
    \s*(?:PARTITION\s*\([^()]*\)\s*)?
    (?:\([^()]*\)\s*)?                 # column list
    (?:VALUES?\s*\(|SET\s)
    """,
    re.X | re.I,
)
_SELECT_WORD_RE = re.compile(r"\bSELECT\b", re.I)


def _insert(st: _Stmt) -> Analysis:
    m = _SIMPLE_INSERT_RE.match(st.key)
    if m and not _SELECT_WORD_RE.search(st.key) and not _ODKU_RE.search(st.key):
        table = _pair(m.group("name"))
        truncated = st.truncated and st.verb == "INSERT" and bool(_ODKU_RE.search(st.full[-MAX_PARSE:]))
        return Analysis(
            st.verb,
            tables=(table,),
            targets=(table,),
            destructive=st.verb == "REPLACE" or truncated,
            flags=frozenset({"truncated"}) if st.truncated else frozenset(),
        )
    return _parse_data(st)


# --- DDL -------------------------------------------------------------------

_TRUNCATE_RE = re.compile(rf"^TRUNCATE\s+(?:TABLE\s+)?(?P<name>{_QNAME})", re.I)


def _truncate(st: _Stmt) -> Analysis:
    table = _first(_TRUNCATE_RE, st.key)
    if table is None:
        return Analysis("TRUNCATE", destructive=True, flags=frozenset({"unparsed"}))
    return Analysis("TRUNCATE", tables=(table,), targets=(table,), destructive=True)


_DROP_RE = re.compile(
    r"""
    ^DROP\s+
    (?P<temporary>TEMPORARY\s+)?
    (?:ONLINE\s+|OFFLINE\s+|UNDO\s+)?
    (?P<object>TABLES?|DATABASE|SCHEMA|VIEW|INDEX|KEY|USER|ROLE|PROCEDURE|FUNCTION|TRIGGER|EVENT
       |SEQUENCE|SERVER|TABLESPACE|PACKAGE(?:\s+BODY)?|PREPARE|LOGFILE\s+GROUP|RESOURCE\s+GROUP
       |SPATIAL\s+REFERENCE\s+SYSTEM|COMPONENT)\b
    \s*(?:IF\s+EXISTS\s+)?
    (?P<rest>.*)
    """,
    re.X | re.I | re.S,
)
_ON_TABLE_RE = re.compile(rf"\bON\s+(?P<name>{_QNAME})", re.I)


def _object_word(raw: str) -> str:
    word = " ".join(raw.upper().split())
    return {"SCHEMA": "DATABASE", "TABLES": "TABLE", "KEY": "INDEX"}.get(word, word)


def _drop(st: _Stmt) -> Analysis:
    m = _DROP_RE.match(st.key)
    if not m:
        return Analysis("DROP", flags=frozenset({"unparsed"}))
    obj, rest = _object_word(m.group("object")), m.group("rest")
    if obj in ("TABLE", "VIEW", "SEQUENCE"):
        names = tuple(_pairs(rest))
        # A TEMPORARY table lives and dies with its session: no shared data is lost,
        # and DROP TEMPORARY never touches a permanent table of the same name.
        destructive = not (obj == "TABLE" and m.group("temporary"))
        return Analysis(f"DROP {obj}", tables=names, targets=names, destructive=destructive)
    if obj == "DATABASE":
        names = tuple((db, "*") for _, db in _pairs(rest)[:1])
        return Analysis("DROP DATABASE", tables=names, targets=names, destructive=True)
    if obj == "INDEX":
        table = _first(_ON_TABLE_RE, rest)
        return Analysis("DROP INDEX", tables=(table,) if table else ())
    if obj in ("USER", "ROLE"):
        return Analysis(f"DROP {obj}", flags=frozenset({"privilege_change"}))
    if obj == "PREPARE":
        return Analysis("DEALLOCATE PREPARE")
    # Routines, triggers, events, servers, tablespaces: definitions, not rows.
    return Analysis(f"DROP {obj}")


_STORED_PROGRAM_RE = re.compile(
    r"""
      ^CREATE \s+ (?:OR\s+REPLACE\s+)?
      (?:DEFINER\s*=\s*(?:`[^`]*`|[^\s`])+\s+)?     # DEFINER=`root`@`%`, DEFINER=CURRENT_USER()
      (?:AGGREGATE\s+)?
      (?P<kind>PROCEDURE|FUNCTION|TRIGGER|EVENT|PACKAGE(?:\s+BODY)?)\b
    | ^(?:[\w$]+\s*:\s*)?BEGIN\s+NOT\s+ATOMIC\b        # MariaDB anonymous block: runs at once
    """,
    re.X | re.I,
)
_CREATE_RE = re.compile(
    r"""
    ^CREATE\s+
    (?P<replace>OR\s+REPLACE\s+)?
    (?P<mods>(?:(?:ALGORITHM\s*=\s*\w+|DEFINER\s*=\s*(?:`[^`]*`|[^\s`])+|SQL\s+SECURITY\s+\w+
                  |TEMPORARY|UNIQUE|FULLTEXT|SPATIAL|ONLINE|OFFLINE|UNDO)\s+)*)
    (?P<object>TABLE|DATABASE|SCHEMA|VIEW|INDEX|USER|ROLE|SEQUENCE|SERVER|TABLESPACE|LOGFILE\s+GROUP
       |RESOURCE\s+GROUP|SPATIAL\s+REFERENCE\s+SYSTEM)\b
    \s*(?:IF\s+NOT\s+EXISTS\s+)?
    (?P<rest>.*)
    """,
    re.X | re.I | re.S,
)
_LIKE_RE = re.compile(rf"^\s*+(?:\(\s*+)?LIKE\s+(?P<name>{_QNAME})", re.I)
_AS_SELECT_RE = re.compile(r"\bAS\s+(?=\(?\s*(?:SELECT|WITH)\b)", re.I)


def _select_tables(st: _Stmt, sql: str) -> tuple[list[Name], bool]:
    """Tables read by a query (a view body); False when unparsed."""
    tree = st.parse(sql)
    if tree is None:
        return list(_loose(sql, "SELECT", set()).tables), False
    return _tree_tables(tree)[0], True


def _create(st: _Stmt) -> Analysis:
    program = _STORED_PROGRAM_RE.match(st.key)
    if program:
        return _stored_program(st, program.group("kind"))
    m = _CREATE_RE.match(st.key)
    if not m:
        return Analysis("CREATE", flags=frozenset({"unparsed"}))
    obj, rest = _object_word(m.group("object")), m.group("rest")
    or_replace = bool(m.group("replace"))
    temporary = "TEMPORARY" in m.group("mods").upper()
    if obj in ("TABLE", "VIEW", "SEQUENCE"):
        first = _FIRST_NAME_RE.match(rest)
        if not first:
            return Analysis(f"CREATE {obj}", flags=frozenset({"unparsed"}))
        names = [_pair(first.group("name"))]
        tables, flags = list(names), set()
        like = _LIKE_RE.match(rest[first.end() :])
        if like:
            tables.append(_pair(like.group("name")))
        elif _SELECT_WORD_RE.search(rest):
            as_select = _AS_SELECT_RE.search(rest) if obj == "VIEW" else None
            query = rest[as_select.end() :] if as_select else None
            source, parsed = _select_tables(st, query) if query else _create_table_select(st)
            tables += source
            if not parsed:
                flags.add("unparsed")
        # MariaDB's CREATE OR REPLACE TABLE drops the existing table first.
        destructive = or_replace and obj in ("TABLE", "SEQUENCE") and not temporary
        return Analysis(
            f"CREATE {obj}",
            tables=tuple(dict.fromkeys(tables)),
            targets=tuple(names),
            destructive=destructive,
            flags=frozenset(flags),
        )
    if obj == "DATABASE":
        names = tuple((db, "*") for _, db in _pairs(rest)[:1])
        return Analysis("CREATE DATABASE", tables=names, targets=names)
    if obj == "INDEX":
        table = _first(_ON_TABLE_RE, rest)
        return Analysis("CREATE INDEX", tables=(table,) if table else ())
    if obj in ("USER", "ROLE"):
        return Analysis(f"CREATE {obj}", flags=frozenset({"privilege_change"}))
    return Analysis(f"CREATE {obj}")


def _create_table_select(st: _Stmt) -> tuple[list[Name], bool]:
    tree = st.parse(st.bare)
    if tree is None:
        return list(_loose(st.key, "SELECT", set()).tables), False
    return _tree_tables(tree)[0], True


# Statement starts inside a stored program body: after a ";" or a keyword that
# opens a block or branch, or a label.
_BODY_STATEMENT_RE = re.compile(
    r"""
    (?: ; | \b(?:BEGIN|THEN|ELSE|DO|LOOP|REPEAT|ROW|ATOMIC)\b | (?<!:):(?!=) ) \s*
    (?= (?:DELETE|UPDATE|INSERT|REPLACE|TRUNCATE|DROP|ALTER|RENAME|CREATE|GRANT|REVOKE|SET|CALL
          |LOAD|PREPARE|EXECUTE|SELECT|WITH)\b )
    """,
    re.X | re.I,
)
_TRIGGER_TABLE_RE = re.compile(rf"\bON\s+(?P<name>{_QNAME})\s+FOR\s+EACH\s+ROW\b", re.I)


def _body(st: _Stmt) -> list[Analysis]:
    """Analyses of the statements inside a compound statement's body (read from the key)."""
    found = []
    for m in _BODY_STATEMENT_RE.finditer(st.key):
        end = st.key.find(";", m.end())
        inner = st.key[m.end() : end if end >= 0 else None].strip()
        if inner:
            found.append(analyse(inner, inner, depth=st.depth + 1))
    return found


def _stored_program(st: _Stmt, kind: str | None) -> Analysis:
    body = _body(st) if st.depth < _MAX_DEPTH else []
    tables = [t for a in body for t in a.tables]
    if kind is None:
        # BEGIN NOT ATOMIC ... END runs its body now, like a multi-statement string.
        first_destructive = next((a.statement_type for a in body if a.destructive), "BEGIN NOT ATOMIC")
        flags = {f for a in body for f in a.flags}
        return Analysis(
            first_destructive,
            tables=tuple(dict.fromkeys(tables)),
            targets=tuple(dict.fromkeys(t for a in body for t in a.targets)),
            destructive=any(a.destructive for a in body),
            flags=frozenset(flags | {"multi_statement"}),
        )
    # Creating a routine, trigger or event changes no rows now, but its body will:
    # its tables are listed so a search for the table finds it, and a body that
    # destroys data says so.
    if kind.upper() == "TRIGGER":
        table = _first(_TRIGGER_TABLE_RE, st.key)
        if table:
            tables.insert(0, table)
    flags = {"routine"}
    if any(a.destructive for a in body):
        flags.add("destructive_body")
    return Analysis(
        f"CREATE {' '.join(kind.upper().split())}",
        tables=tuple(dict.fromkeys(tables)),
        flags=frozenset(flags),
    )


_ALTER_TABLE_RE = re.compile(
    rf"^ALTER\s+(?:ONLINE\s+|OFFLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?(?P<name>{_QNAME})(?P<rest>.*)$",
    re.I | re.S,
)
# ALTER TABLE actions that lose or overwrite data. Dropping an index, key or
# constraint loses no rows; dropping a column, partition or the history of a
# system-versioned table does.
_ALTER_DESTRUCTIVE_RE = re.compile(
    r"""
      \bDROP\s+(?!(?:INDEX|KEY|FOREIGN|PRIMARY|CONSTRAINT|CHECK|PERIOD|DEFAULT|UNIQUE|FULLTEXT|SPATIAL)\b)
    | \bMODIFY\b | \bCHANGE\b                  # a narrower type truncates values
    | \bRENAME\b(?!\s+(?:INDEX|KEY)\b)         # RENAME TO (like RENAME TABLE), RENAME COLUMN
    | \b(?:TRUNCATE|EXCHANGE)\s+PARTITION\b
    | \bDISCARD\b | \bIMPORT\b                 # DISCARD/IMPORT [PARTITION ...] TABLESPACE
    | \bENGINE\s*=?\s*BLACKHOLE\b              # BLACKHOLE keeps no rows
    """,
    re.X | re.I,
)
_ALTER_RENAME_TO_RE = re.compile(
    rf"\bRENAME\s+(?:TO\s+|AS\s+)?(?!(?:COLUMN|INDEX|KEY)\b)(?P<name>{_QNAME})", re.I
)
_EXCHANGE_WITH_RE = re.compile(rf"\bWITH\s+TABLE\s+(?P<name>{_QNAME})", re.I)
_QUOTED_IDENT_RE = re.compile(r"`(?:[^`]|``)*`")
_ALTER_OTHER_RE = re.compile(
    r"""
    ^ALTER\s+
    (?:(?:ALGORITHM\s*=\s*\w+|DEFINER\s*=\s*(?:`[^`]*`|[^\s`])+|SQL\s+SECURITY\s+\w+|ONLINE|OFFLINE|UNDO)\s+)*
    (?P<object>DATABASE|SCHEMA|VIEW|USER|ROLE|EVENT|PROCEDURE|FUNCTION|SERVER|TABLESPACE|LOGFILE\s+GROUP
       |INSTANCE|SEQUENCE|RESOURCE\s+GROUP|PACKAGE)\b
    \s*(?:IF\s+EXISTS\s+)?
    (?P<rest>.*)
    """,
    re.X | re.I | re.S,
)
_DATABASE_OPTION_RE = re.compile(
    r"(?:DEFAULT|CHARACTER|CHARSET|COLLATE|READ|ENCRYPTION|UPGRADE|COMMENT)\b", re.I
)


def _alter(st: _Stmt) -> Analysis:
    m = _ALTER_TABLE_RE.match(st.key)
    if m:
        table = _pair(m.group("name"))
        # Quoted names may be any word (a column called `drop`): blank them first.
        actions = _QUOTED_IDENT_RE.sub("`x`", m.group("rest"))
        names = [table]
        for pattern in (_ALTER_RENAME_TO_RE, _EXCHANGE_WITH_RE):
            other = pattern.search(m.group("rest"))
            if other and other.group("name").upper() not in _NOT_NAMES:
                names.append(_pair(other.group("name")))
        names = list(dict.fromkeys(names))
        return Analysis(
            "ALTER TABLE",
            tables=tuple(names),
            targets=tuple(names),
            destructive=bool(_ALTER_DESTRUCTIVE_RE.search(actions)),
        )
    m = _ALTER_OTHER_RE.match(st.key)
    if not m:
        return Analysis("ALTER", flags=frozenset({"unparsed"}))
    obj, rest = _object_word(m.group("object")), m.group("rest")
    if obj == "DATABASE":
        names = () if _DATABASE_OPTION_RE.match(rest) else tuple((db, "*") for _, db in _pairs(rest)[:1])
        return Analysis("ALTER DATABASE", tables=names, targets=names)
    if obj in ("VIEW", "SEQUENCE"):
        names = _pairs(rest)[:1]
        as_select = _AS_SELECT_RE.search(rest)
        source, parsed = _select_tables(st, rest[as_select.end() :]) if as_select else ([], True)
        return Analysis(
            f"ALTER {obj}",
            tables=tuple(dict.fromkeys(names + source)),
            targets=tuple(names),
            flags=frozenset() if parsed else frozenset({"unparsed"}),
        )
    if obj in ("USER", "ROLE"):
        return Analysis(f"ALTER {obj}", flags=frozenset({"privilege_change"}))
    return Analysis(f"ALTER {obj}")


_RENAME_RE = re.compile(r"^RENAME\s+(?P<object>TABLES?|USER)\b\s*(?P<rest>.*)$", re.I | re.S)
# A pair starts where a name starts (not inside a word: searching a long word from each of
# its characters was quadratic).
_RENAME_PAIR_RE = re.compile(rf"(?<![\w$`])(?P<old>{_QNAME})\s+TO\s+(?P<new>{_QNAME})", re.I)


def _rename(st: _Stmt) -> Analysis:
    m = _RENAME_RE.match(st.key)
    if not m:
        return Analysis("RENAME", flags=frozenset({"unparsed"}))
    if m.group("object").upper() == "USER":
        return Analysis("RENAME USER", flags=frozenset({"privilege_change"}))
    # The old name stops holding the data and the new one starts: both are touched.
    names = tuple(
        dict.fromkeys(
            pair
            for p in _RENAME_PAIR_RE.finditer(m.group("rest"))
            for pair in (_pair(p["old"]), _pair(p["new"]))
        )
    )
    return Analysis("RENAME TABLE", tables=names, targets=names, destructive=True)


# GRANT ... ON [TABLE] db.t | db.* | *.* | * TO ...; routines are not tables.
_GRANT_ON_RE = re.compile(
    rf"""
    \bON\s+
    (?:(?P<routine>FUNCTION|PROCEDURE|PACKAGE(?:\s+BODY)?)\s+|TABLE\s+)?
    (?P<db>\*|{_NAME}) (?:\s*\.\s*(?P<obj>\*|{_NAME}))?
    """,
    re.X | re.I,
)


def _grant(st: _Stmt) -> Analysis:
    tables: tuple[Name, ...] = ()
    m = _GRANT_ON_RE.search(st.key)
    if m and not m.group("routine"):
        db, obj = _unquote(m.group("db")), m.group("obj")
        tables = ((db, _unquote(obj)),) if obj else ((None, db),)
    return Analysis(st.verb, tables=tables, flags=frozenset({"privilege_change"}))


# --- SET -----------------------------------------------------------------------

# Assignments that blind a log, by variable: the values (upper-case, unquoted)
# that turn logging off. DEFAULT is listed where the compiled-in default is off.
_LOG_OFF_VALUES: dict[str, frozenset[str]] = {
    "general_log": frozenset({"OFF", "0", "FALSE", "DEFAULT"}),
    "slow_query_log": frozenset({"OFF", "0", "FALSE", "DEFAULT"}),
    "sql_log_off": frozenset({"ON", "1", "TRUE"}),  # stops the general log for this session
    "sql_log_bin": frozenset({"OFF", "0", "FALSE"}),  # keeps the change out of the binary log
    "server_audit_logging": frozenset({"OFF", "0", "FALSE", "DEFAULT"}),  # MariaDB audit plugin
    "audit_log_disable": frozenset({"ON", "1", "TRUE"}),  # MySQL Enterprise audit
    "audit_log_policy": frozenset({"NONE"}),  # Percona audit_log
}
# Variables where any change redirects or narrows what a log records.
_LOG_REDIRECTS = frozenset(
    {
        "general_log_file",
        "slow_query_log_file",
        "server_audit_file_path",
        "server_audit_output_type",
        "server_audit_events",
        "server_audit_excl_users",
        "server_audit_incl_users",
        "audit_log_exclude_accounts",
        "audit_log_include_accounts",
    }
)
_ASSIGNMENT_RE = re.compile(
    r"""
    \s*
    (?: (?:GLOBAL|SESSION|LOCAL|PERSIST|PERSIST_ONLY) \s+ )?
    (?: @@ (?: (?:GLOBAL|SESSION|LOCAL|PERSIST|PERSIST_ONLY) \. )? )?   # @@global.x (never a user's @x)
    (?P<name> `?[A-Za-z_$][\w$]*`? (?:\.`?[\w$]+`?)? )
    \s* :?= \s*
    (?P<value> .*? ) \s*$
    """,
    re.X | re.I | re.S,
)
# Top-level commas separate assignments; commas in literals and calls do not.
_SET_TOKENS_RE = re.compile(rf"{SINGLE_QUOTED}|{DOUBLE_QUOTED}|`[^`]*`|[(),]", re.S)
_SET_HEAD_RE = re.compile(r"^\s*SET\s+", re.I)
_SET_STATEMENT_FOR_RE = re.compile(rf"{SINGLE_QUOTED}|{DOUBLE_QUOTED}|`[^`]*`|(?P<for>\bFOR\b)", re.I | re.S)


def _top_level_split(body: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for m in _SET_TOKENS_RE.finditer(body):
        token = m.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif token == "," and depth == 0:
            parts.append(body[start : m.start()])
            start = m.end()
    parts.append(body[start:])
    return parts


def _variables(assignments: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(variable name in lower case, value unquoted in upper case) of each `name = value` of a SET."""
    for assignment in assignments:
        m = _ASSIGNMENT_RE.match(assignment)
        if not m:
            continue
        value = m.group("value")
        if value[:1] in ("'", '"'):
            value = unquote_string(value)
        yield m.group("name").replace("`", "").lower(), value.strip().upper()


def _log_flags(assignments: list[str]) -> tuple[set[str], bool]:
    """anti_forensic when an assignment blinds a log; sensitive when a watched variable is set."""
    flags: set[str] = set()
    sensitive = False
    for name, value in _variables(assignments):
        if name in _LOG_OFF_VALUES:
            sensitive = True
            if value in _LOG_OFF_VALUES[name]:
                flags.add("anti_forensic")
        elif name in _LOG_REDIRECTS:
            sensitive = True
            flags.add("anti_forensic")
        elif name == "log_output":
            sensitive = True
            # NONE wins over any other destination: 'FILE,NONE' logs nothing.
            if "NONE" in {v.strip() for v in value.split(",")}:
                flags.add("anti_forensic")
    return flags, sensitive


# What switches each log back on (the other side of _LOG_OFF_VALUES): DEFAULT only where the
# compiled-in default records.
_LOG_ON_VALUES: dict[str, frozenset[str]] = {
    "general_log": frozenset({"ON", "1", "TRUE"}),
    "slow_query_log": frozenset({"ON", "1", "TRUE"}),
    "sql_log_off": frozenset({"OFF", "0", "FALSE", "DEFAULT"}),
    "sql_log_bin": frozenset({"ON", "1", "TRUE", "DEFAULT"}),
    "server_audit_logging": frozenset({"ON", "1", "TRUE"}),
    "audit_log_disable": frozenset({"OFF", "0", "FALSE", "DEFAULT"}),
    "audit_log_policy": frozenset({"ALL", "LOGINS", "QUERIES"}),
}
_PLUGIN_RE = re.compile(r"^\s*(?P<verb>UNINSTALL|INSTALL)\s+(?:PLUGIN|SONAME)\b", re.I)
_MAX_SWITCH_TEXT = 4096  # a statement that switches a log is short; longer ones are not read


def log_switches(text: str) -> tuple[tuple[str, bool], ...]:
    """The logs a statement switches off (False) or back on (True), as (kind, on) pairs.

    Kinds are the variables of _LOG_OFF_VALUES, `log_output` (off: NONE; on: a destination
    without NONE) and `audit_plugin` (an audit plugin unloaded or loaded again with
    UNINSTALL/INSTALL PLUGIN or SONAME). SET STATEMENT ... FOR changes nothing for long: none.
    Both ends of one act are paired by kind (see normalize.ReenableWatch).
    """
    bare = strip_comments(text[:_MAX_SWITCH_TEXT]).strip()
    plugin = _PLUGIN_RE.match(bare)
    if plugin is not None:
        if "audit" not in bare.lower():
            return ()
        return (("audit_plugin", plugin["verb"].upper() == "INSTALL"),)
    head = _SET_HEAD_RE.match(bare)
    if head is None or bare[head.end() :][:9].upper() == "STATEMENT":
        return ()
    found: list[tuple[str, bool]] = []
    for name, value in _variables(_top_level_split(bare[head.end() :])):
        if name == "log_output":
            found.append((name, "NONE" not in {v.strip() for v in value.split(",")}))
        elif value in _LOG_OFF_VALUES.get(name, ()):
            found.append((name, False))
        elif value in _LOG_ON_VALUES.get(name, ()):
            found.append((name, True))
    return tuple(found)


def _set(st: _Stmt) -> Analysis:
    second = st.word(1)
    if second == "PASSWORD":
        return Analysis("SET PASSWORD", flags=frozenset({"privilege_change"}))
    if second == "ROLE":
        return Analysis("SET ROLE")
    if second == "DEFAULT" and st.word(2) == "ROLE":
        return Analysis("SET DEFAULT ROLE", flags=frozenset({"privilege_change"}))
    body = _SET_HEAD_RE.sub("", st.bare, count=1)
    if second == "STATEMENT":
        # MariaDB: SET STATEMENT var=value [, ...] FOR <statement> runs the statement.
        split = next((m for m in _SET_STATEMENT_FOR_RE.finditer(body) if m.group("for")), None)
        if split is not None and st.depth < _MAX_DEPTH:
            inner = analyse_text(body[split.end() :], depth=st.depth + 1)
            flags, sensitive = _log_flags(_top_level_split(body[len("STATEMENT") : split.start()]))
            return Analysis(
                inner.statement_type,
                tables=inner.tables,
                targets=inner.targets,
                destructive=inner.destructive,
                flags=inner.flags | flags,
                literal_sensitive=inner.literal_sensitive or sensitive,
            )
    flags, sensitive = _log_flags(_top_level_split(body))
    return Analysis("SET", flags=frozenset(flags), literal_sensitive=sensitive)


# --- prepared statements, EXPLAIN, maintenance -------------------------------

_PREPARE_RE = re.compile(
    rf"^\s*PREPARE\s+{_NAME}\s+FROM\s+(?P<src>{SINGLE_QUOTED}|{DOUBLE_QUOTED})", re.I | re.S
)
_EXECUTE_IMMEDIATE_RE = re.compile(
    rf"^\s*EXECUTE\s+IMMEDIATE\s+(?P<src>{SINGLE_QUOTED}|{DOUBLE_QUOTED})", re.I | re.S
)


def _prepare(st: _Stmt) -> Analysis:
    m = _PREPARE_RE.match(st.bare)
    if not m or st.depth >= _MAX_DEPTH:
        return Analysis("PREPARE")  # PREPARE s FROM @var: the text is not in the log line
    # Preparing runs nothing; the tables and flags of the prepared text are kept so
    # a search finds it, and the EXECUTE that follows is what changes data.
    inner = analyse_text(unquote_string(m.group("src")), depth=st.depth + 1)
    return Analysis("PREPARE", tables=inner.tables, flags=inner.flags, literal_sensitive=True)


def _execute(st: _Stmt) -> Analysis:
    m = _EXECUTE_IMMEDIATE_RE.match(st.bare)
    if not m or st.depth >= _MAX_DEPTH:
        return Analysis("EXECUTE")  # EXECUTE s: what s does was logged at its PREPARE
    inner = analyse_text(unquote_string(m.group("src")), depth=st.depth + 1)
    return Analysis(
        "EXECUTE",
        tables=inner.tables,
        targets=inner.targets,
        destructive=inner.destructive,
        flags=inner.flags,
        literal_sensitive=True,
    )


_EXPLAIN_RE = re.compile(
    r"""^\s*(?:EXPLAIN|DESCRIBE|DESC)\s+
    (?P<opts>(?:(?:EXTENDED|PARTITIONS|ANALYZE|FORMAT\s*=\s*\w+)\s+)*)
    (?P<rest>.*)$""",
    re.X | re.I | re.S,
)
_STATEMENT_START_RE = re.compile(r"\(*\s*(?:SELECT|INSERT|REPLACE|UPDATE|DELETE|TABLE|WITH|VALUES)\b", re.I)


def _explain(st: _Stmt) -> Analysis:
    m = _EXPLAIN_RE.match(st.bare)
    if m and _STATEMENT_START_RE.match(m.group("rest")) and st.depth < _MAX_DEPTH:
        inner = analyse_text(m.group("rest"), depth=st.depth + 1)
        if "ANALYZE" in m.group("opts").upper():
            return inner  # EXPLAIN ANALYZE runs the statement
        return Analysis("EXPLAIN", tables=inner.tables, literal_sensitive=inner.literal_sensitive)
    if m and m.group("rest").upper().startswith("FOR "):
        return Analysis("EXPLAIN")  # EXPLAIN FOR CONNECTION n
    rest = _EXPLAIN_RE.match(st.key)
    table = _first(_FIRST_NAME_RE, rest.group("rest")) if rest else None
    return Analysis("DESCRIBE", tables=(table,) if table else ())


_TABLE_MAINTENANCE_RE = re.compile(
    r"^(?P<verb>ANALYZE|OPTIMIZE|CHECK|REPAIR|CHECKSUM)\s+(?:NO_WRITE_TO_BINLOG\s+|LOCAL\s+)?TABLES?\s+(?P<rest>.*)$",
    re.I | re.S,
)
_ANALYZE_STATEMENT_RE = re.compile(r"^\s*ANALYZE\s+(?:FORMAT\s*=\s*\w+\s+)?(?P<rest>.*)$", re.I | re.S)


def _maintenance(st: _Stmt) -> Analysis:
    m = _TABLE_MAINTENANCE_RE.match(st.key)
    if m:
        return Analysis(f"{m.group('verb').upper()} TABLE", tables=tuple(_pairs(m.group("rest"))))
    if st.verb == "ANALYZE" and st.depth < _MAX_DEPTH:
        # MariaDB's ANALYZE <statement> runs the statement and reports on it.
        inner = _ANALYZE_STATEMENT_RE.match(st.bare)
        if inner and _STATEMENT_START_RE.match(inner.group("rest")):
            return analyse_text(inner.group("rest"), depth=st.depth + 1)
    return Analysis(st.verb, flags=frozenset({"unparsed"}))


_LOCK_RE = re.compile(r"^LOCK\s+TABLES?\s+(?P<rest>.*)$", re.I | re.S)


def _lock(st: _Stmt) -> Analysis:
    m = _LOCK_RE.match(st.key)
    if not m:
        return Analysis(f"LOCK {st.word(1)}".strip())
    tables = []
    for item in m.group("rest").split(","):
        im = _ITEM_RE.match(item)
        if im:
            tables.append(_pair(im.group("name")))
    return Analysis("LOCK TABLES", tables=tuple(dict.fromkeys(tables)))


_LOAD_INTO_RE = re.compile(rf"\bINTO\s+TABLE\s+(?P<name>{_QNAME})", re.I)
_LOAD_REPLACE_RE = re.compile(r"\bREPLACE\s+INTO\s+TABLE\b", re.I)


def _load(st: _Stmt) -> Analysis:
    kind = st.word(1)
    if kind not in ("DATA", "XML"):
        return Analysis(f"LOAD {kind}".strip())  # LOAD INDEX INTO CACHE
    table = _first(_LOAD_INTO_RE, st.key)
    names = (table,) if table else ()
    return Analysis(
        f"LOAD {kind}",
        tables=names,
        targets=names,
        destructive=bool(_LOAD_REPLACE_RE.search(st.key)),  # REPLACE overwrites rows with equal keys
        flags=frozenset() if table else frozenset({"unparsed"}),
    )


def _simple(statement_type: str, *flags: str, destructive: bool = False) -> _Handler:
    analysis = Analysis(statement_type, destructive=destructive, flags=frozenset(flags))
    return lambda st: analysis


def _two_words(st: _Stmt) -> Analysis:
    return Analysis(f"{st.verb} {st.word(1)}".strip())


def _begin(st: _Stmt) -> Analysis:
    if _STORED_PROGRAM_RE.match(st.key):
        return _stored_program(st, None)
    return Analysis("BEGIN")


def _start(st: _Stmt) -> Analysis:
    return Analysis("BEGIN") if st.word(1) == "TRANSACTION" else _two_words(st)


def _reset(st: _Stmt) -> Analysis:
    if st.word(1) in ("MASTER", "BINARY"):
        # RESET MASTER (8.4: RESET BINARY LOGS AND GTIDS) deletes every binary log.
        return Analysis("RESET MASTER", flags=frozenset({"anti_forensic"}))
    return _two_words(st)


def _uninstall(st: _Stmt) -> Analysis:
    # UNINSTALL PLUGIN server_audit / audit_log, or SONAME 'server_audit': the name
    # may be a string literal, so the answer depends on more than the key.
    flags = frozenset({"anti_forensic"}) if "audit" in st.bare.lower() else frozenset()
    return Analysis(f"UNINSTALL {st.word(1)}".strip(), flags=flags, literal_sensitive=True)


def _clone(st: _Stmt) -> Analysis:
    # CLONE INSTANCE FROM replaces this server's data with the donor's.
    return Analysis("CLONE", destructive=st.word(1) == "INSTANCE")


_HANDLER_RE = re.compile(rf"^HANDLER\s+(?P<name>{_QNAME})", re.I)


def _handler(st: _Stmt) -> Analysis:
    table = _first(_HANDLER_RE, st.key)
    return Analysis("HANDLER", tables=(table,) if table else ())


_HANDLERS: dict[str, _Handler] = {
    "SELECT": _query,
    "WITH": _query,
    "TABLE": _query,
    "VALUES": _query,
    "INSERT": _insert,
    "REPLACE": _insert,
    "UPDATE": _parse_data,
    "DELETE": _parse_data,
    "TRUNCATE": _truncate,
    "DROP": _drop,
    "CREATE": _create,
    "ALTER": _alter,
    "RENAME": _rename,
    "GRANT": _grant,
    "REVOKE": _grant,
    "SET": _set,
    "PREPARE": _prepare,
    "EXECUTE": _execute,
    "EXPLAIN": _explain,
    "DESCRIBE": _explain,
    "DESC": _explain,
    "ANALYZE": _maintenance,
    "OPTIMIZE": _maintenance,
    "CHECK": _maintenance,
    "REPAIR": _maintenance,
    "CHECKSUM": _maintenance,
    "LOCK": _lock,
    "LOAD": _load,
    "BEGIN": _begin,
    "START": _start,
    "RESET": _reset,
    "UNINSTALL": _uninstall,
    "CLONE": _clone,
    "HANDLER": _handler,
    "USE": _simple("USE"),
    "SHOW": _simple("SHOW"),
    "COMMIT": _simple("COMMIT"),
    "ROLLBACK": _simple("ROLLBACK"),
    "SAVEPOINT": _simple("SAVEPOINT"),
    "RELEASE": _simple("RELEASE SAVEPOINT"),
    "DEALLOCATE": _simple("DEALLOCATE PREPARE"),
    "CALL": _simple("CALL", "routine"),
    "PURGE": _simple("PURGE BINARY LOGS", "anti_forensic"),  # deletes binary logs
    # mysqlbinlog output replays row events that can delete or overwrite anything.
    "BINLOG": _simple("BINLOG", destructive=True),
    "FLUSH": _simple("FLUSH"),  # FLUSH LOGS rotates; nothing is lost
    "KILL": _simple("KILL"),
    "DO": _simple("DO"),
    "HELP": _simple("HELP"),
    "SHUTDOWN": _simple("SHUTDOWN"),
    "RESTART": _simple("RESTART"),
    "SIGNAL": _simple("SIGNAL"),
    "RESIGNAL": _simple("RESIGNAL"),
    "GET": _simple("GET DIAGNOSTICS"),
    "BACKUP": _two_words,
    "CACHE": _simple("CACHE INDEX"),
    "IMPORT": _simple("IMPORT TABLE"),
    "INSTALL": _two_words,
    "UNLOCK": _two_words,
    "CHANGE": _two_words,
    "STOP": _two_words,
    "XA": _two_words,
}

_HEAD_RE = re.compile(r"[\s(]*([A-Za-z_]+)(?:\s+([A-Za-z_]+))?(?:\s+([A-Za-z_]+))?")


def analyse(text: str, key: str, *, depth: int = 0, full: str | None = None) -> Analysis:
    """Analyse one statement given its cleaned text and its key (see lexer).

    `full` is the complete statement when `text` is only its head (too long to parse).
    """
    m = _HEAD_RE.match(key)
    if not m:
        return Analysis("UNKNOWN", flags=frozenset({"unparsed"}))
    words = [w.upper() for w in m.groups() if w]
    handler = _HANDLERS.get(words[0])
    if handler is None:
        # Not a statement we know: keep it, say so.
        return Analysis("UNKNOWN", flags=frozenset({"unparsed"}))
    st = _Stmt(text, key, words, depth, full if full is not None else text)
    try:
        return handler(st)
    except Exception:
        # sqlglot trees of odd input can have shapes nobody expected; an ingest
        # must not stop on them. Read the statement again by keywords alone.
        pass
    try:
        fallback = handler(_Stmt(text, key, words, depth, st.full, no_parser=True))
        return replace(fallback, flags=fallback.flags | {"unparsed"})
    except Exception:
        return Analysis(words[0], destructive=words[0] in _DESTRUCTIVE_VERBS, flags=frozenset({"unparsed"}))


# When even the keyword rules fail, err on the side of showing the statement.
_DESTRUCTIVE_VERBS = frozenset(
    {"DELETE", "UPDATE", "REPLACE", "TRUNCATE", "DROP", "RENAME", "ALTER", "BINLOG"}
)


def analyse_text(text: str, *, depth: int = 0) -> Analysis:
    """Analyse statement text found inside another statement (PREPARE, SET STATEMENT ... FOR)."""
    text = text.strip(" \t\r\n\f\v\x00;")
    if len(text) > MAX_PARSE:
        head = text[:MAX_PARSE]
        return analyse(head, normalize_key(head), depth=depth, full=text)
    return analyse(text, normalize_key(text), depth=depth)
