"""Lexing MySQL text without a parser: cleaning, cache keys, fingerprints, comments, splitting.

This runs on every statement of every log, so the common case is done with `str` methods and
regexes that start with a fixed character set; the full lexer (`full_lexer_key`) takes the rest
and agrees with them on valid SQL. The forms text, bare, key and shape: docs/architecture.md,
"Classifying a statement".
"""

from __future__ import annotations

import re

# What a log puts around a statement that is not part of it: mariadb-slap ends
# each statement with NUL, clients often send a trailing ";".
_STRIP = " \t\r\n\f\v\x00;"

# Shared fragments. Quotes follow the server's default sql_mode: backslash
# escapes and doubled quotes both work, "..." is a string (no ANSI_QUOTES).
# A literal cut off by truncation runs to the end of the text instead of
# swallowing nothing, even when the cut leaves a lone backslash at the end. Possessive,
# and a literal always matches from its opening quote: a search never tries again from
# each later quote (an unterminated `\'\'\'...` head of a long statement was quadratic:
# 42 s for 64 KiB).
SINGLE_QUOTED = r"'[^'\\]*+(?:(?:(?s:\\.)|'')[^'\\]*+)*+(?:'|\\?\Z)"
DOUBLE_QUOTED = r'"[^"\\]*+(?:(?:(?s:\\.)|"")[^"\\]*+)*+(?:"|\\?\Z)'
_IDENT = r"`[^`]*+(?:``[^`]*+)*+(?:`|\Z)"
# MySQL's "-- " comment needs a whitespace or control character after the dashes
# (`a--1` is arithmetic); "#" runs to the end of the line.
_LINE_COMMENT = r"--(?=[\x00-\x20]|\Z)[^\n]* | \#[^\n]*"
# An executable comment's content is SQL the server runs (when its version is at
# least the optional 5 or 6 digits): `/*!40101 SET NAMES utf8 */`. Optimizer
# hints `/*+ ... */` are plain comments.
_EXEC_OPEN = r"/\*M?!(?:[0-9]{5,6})?"

_NUMBER = r"""
    [0-9.]                      # a digit or a point: one set of first characters, which the `re`
                                # engine then skips ahead to in C (not for an alternation whose
                                # branches begin with a set: it tried every position, 2x the time)
    (?: (?<=[0-9])              # a digit
        (?<![\w$.`][0-9])       # that does not continue a name (t1, db.2col, `x`2)
        (?: x[0-9a-fA-F]+       # 0x1F
          | b[01]+              # 0b101
          | [0-9]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?   # 42, 4.2, 4e2
        )
      | (?<=\.) (?<![\w$.`]\.) [0-9]+ (?:[eE][+-]?[0-9]+)?  # .5
    )
    (?![\w$`])                  # and is not the start of a name (2fa_codes)
"""

# Hot path: numbers only (strings are already gone).
_NUMBER_RE = re.compile(_NUMBER, re.X)

# Strings only, for text without comments or backticks but with escapes.
_STRING_RE = re.compile(f"{SINGLE_QUOTED}|{DOUBLE_QUOTED}", re.S)

# Full lexer for text with comments or backticks: literals -> ?, identifiers
# kept, comments dropped, executable comments unwrapped.
_KEY_RE = re.compile(
    rf"""
      (?P<str> {SINGLE_QUOTED} | {DOUBLE_QUOTED} )
    | (?P<ident> {_IDENT} )
    | {_EXEC_OPEN} (?P<exec> .*? ) (?:\*/|\Z)
    | (?P<comment> /\*.*?(?:\*/|\Z) | {_LINE_COMMENT} )
    | (?P<num> {_NUMBER} )
    """,
    re.X | re.S,
)

# Comment removal that keeps literals (the "bare" form).
_COMMENT_RE = re.compile(
    rf"""
      (?P<str> {SINGLE_QUOTED} | {DOUBLE_QUOTED} )
    | (?P<ident> {_IDENT} )
    | {_EXEC_OPEN} (?P<exec> .*? ) (?:\*/|\Z)
    | (?P<comment> /\*.*?(?:\*/|\Z) | {_LINE_COMMENT} )
    """,
    re.X | re.S,
)

# Statement separators: a ";" outside literals, identifiers and comments.
# Executable comments are opaque here: a ";" inside one stays inside
# (mysqldump wraps whole trigger bodies in them).
_SPLIT_RE = re.compile(
    rf"""
      {SINGLE_QUOTED} | {DOUBLE_QUOTED} | {_IDENT}
    | /\*.*?(?:\*/|\Z)
    | {_LINE_COMMENT}
    | (?P<semi> ; )
    """,
    re.X | re.S,
)

# pt-query-digest's list collapsing: `IN (?, ?, ?)` and `VALUES (?, ?), (?, ?)`
# become `IN(?+)` / `VALUES(?+)`, so list lengths do not multiply fingerprints.
# A list cut off at the end (a truncated statement's head) collapses the same way.
# Signs stay outside `?` (`-?`), as in `VALUES (-1, +2)`.
_LIST_RE = re.compile(r"\b(in|values?)(?:[\s,]*\([\s?,+-]*(?:\)|\Z))+", re.I)
# NULL/TRUE/FALSE are literals too (pt-query-digest folds them as well).
_WORD_LITERAL_RE = re.compile(r"(?<![\w$.`@])(?:null|true|false)(?![\w$`])", re.I)
# `LIMIT ?, ?` and `LIMIT ? OFFSET ?` page through one query.
_LIMIT_RE = re.compile(r"\blimit \?(?:, ?\?| offset \?)", re.I)


def clean(sql: str) -> str:
    """Drop what surrounds a logged statement; NUL inside becomes a space."""
    text = sql.strip(_STRIP)
    if "\x00" in text:
        text = text.replace("\x00", " ")
    return text


# The server does not nest comments; `/*!/*!/*!...` (hostile) is unwrapped this many
# levels deep, then read as a comment: each level re-reads the rest of the text, and
# without a bound the recursion overflowed Python's stack.
_MAX_EXEC_DEPTH = 4


def _key_token(m: re.Match[str], depth: int = 0) -> str:
    kind = m.lastgroup
    if kind == "ident":
        return m.group()
    if kind == "comment":
        return " "
    if kind == "exec":
        if depth >= _MAX_EXEC_DEPTH:
            return " "
        return " " + _KEY_RE.sub(lambda inner: _key_token(inner, depth + 1), m.group("exec")) + " "
    return "?"


def without_strings(text: str) -> str | None:
    """Cleaned `text` with strings replaced by ? and whitespace folded; None when it needs the full lexer.

    The first half of `normalize_key`, for text without comments.
    """
    if "/*" in text or "#" in text or "--" in text:
        return None
    if "`" in text and not "".join(text.split("`")[1::2]).isidentifier():
        # Backtick-quoted names made of word characters (what ORMs write) hide no
        # quote, space or stand-alone number, so the string and number passes
        # below stay exact. Anything else (`my table`, `x'y`, a backtick inside a
        # string that misaligns the pairs) goes to the full lexer.
        return None
    if "'" in text:
        pieces = text.split("'")
        if len(pieces) & 1 and "\\" not in text and "''" not in text and '"' not in text:
            # Quotes pair up (odd piece count) with no escapes and no other quoting:
            # every other piece is a string. A C-level split is 3x faster than the regex.
            text = "?".join(pieces[::2])
        else:
            text = _STRING_RE.sub("?", text)
    elif '"' in text:
        text = _STRING_RE.sub("?", text)
    if "  " in text or "\n" in text or "\t" in text:
        return " ".join(text.split())
    # Already single-spaced (the usual case): folding would only copy it. Rarer
    # whitespace (a lone \r, \f, Unicode spaces) stays, which only costs a
    # cache entry; fingerprints fold it.
    return text


# What a VALUES list made only of literals consists of once strings are ?:
# numbers, signs, NULL. (A column reference spelled only with these letters,
# `VALUES (nul)`, would be taken for a literal: same classification, and a
# fingerprint that differs from pt-query-digest's for such a name.)
_LITERAL_LIST_CHARS = "0123456789?,() .+-NULnul"
INSERT_HEADS = ("INSERT", "insert", "REPLAC", "replac")


def finish_key(text: str) -> str:
    """The second half of `normalize_key`: numbers -> ?.

    Finishing a key again gives a key of the same shape (one cache entry more
    at worst), which lets `classify` look a statement whose only literals are
    strings up before scanning it for numbers.
    """
    if text[:6] in INSERT_HEADS and text[-1] == ")":
        # Bulk INSERT ... VALUES of plain literals is the commonest statement of
        # all: collapse its values without scanning them for numbers. The head
        # (verb, table, columns) holds no numbers.
        i = text.find("VALUES")
        if i < 0:
            i = text.find("values")
        if i > 0 and text[i - 1] in " )" and not text[i + 6 :].strip(_LITERAL_LIST_CHARS):
            return text[:i] + "VALUES(?+)"
    return _NUMBER_RE.sub("?", text)


# finish_key's answers (finished_key), by the text with each digit replaced by its class: "0" for
# 0 and 1, "2" for 2 to 9, the only difference between digits any test of finish_key makes (the
# sets it reads digits with are [0-9], [01], hex digits and \w). Two texts that differ only in
# the digits of the same classes are lexed alike, step by step: the same spans become `?`, and
# the rest is copied as it is. So where the key kept no digit (every one was in a number), every
# text of the same classes has that key; a key that kept one (`t1`) is not shared (None).
# Bounded like the classifier's verbatim cache: entries of up to 1 KiB, emptied when full.
_DIGIT_CLASSES = bytes.maketrans(b"0123456789", b"0022222222")
_ASCII_DIGIT = re.compile(r"[0-9]")
_FINISHED: dict[bytes, str | None] = {}
_FINISHED_MAX = 16_384
_FINISHED_MAX_CHARS = 1024


def finished_key(text: str) -> str:
    """finish_key(text), remembered for the texts of its shape whose digits differ (see
    _FINISHED): a log of the same statements with ever-new numbers lexes each shape once."""
    if len(text) > _FINISHED_MAX_CHARS:
        return finish_key(text)
    # UTF-8 with lone surrogates kept (a JSON `\ud800`): one byte string for each text.
    classes = text.encode("utf-8", "surrogatepass").translate(_DIGIT_CLASSES)
    known = _FINISHED.get(classes, False)
    if isinstance(known, str):
        return known
    key = finish_key(text)
    if known is False:  # not seen (None: seen, and its key keeps a digit)
        if len(_FINISHED) >= _FINISHED_MAX:
            _FINISHED.clear()  # cheaper on this path than evicting one by one
        _FINISHED[classes] = key if _ASCII_DIGIT.search(key) is None else None
    return key


def forget_keys() -> None:
    """Forget finished_key's answers (classify.clear_cache: benchmarks and tests)."""
    _FINISHED.clear()


def normalize_key(text: str) -> str:
    """The cache key of cleaned `text`: literals -> ?, comments gone, whitespace folded.

    Identifiers keep their case and backticks, so the key decides the tables.
    """
    stripped = without_strings(text)
    if stripped is None:
        return full_lexer_key(text)
    return finish_key(stripped)


def full_lexer_key(text: str) -> str:
    """The key by the full lexer alone; the quick passes must agree with it (tests check)."""
    return " ".join(_KEY_RE.sub(_key_token, text).split())


def shape_of(key: str) -> str:
    """The key with NULL/TRUE/FALSE folded and value lists collapsed: one per query shape."""
    key = _WORD_LITERAL_RE.sub("?", key)  # first, so `VALUES (NULL, 1)` collapses too
    if "?" in key:
        key = _LIST_RE.sub(r"\1(?+)", key)
        if "imit ?" in key or "IMIT ?" in key:
            key = _LIMIT_RE.sub("LIMIT ?", key)
    return key


def fingerprint_of_key(key: str) -> str:
    return " ".join(shape_of(key).lower().split())


def _comment_token(m: re.Match[str], depth: int = 0) -> str:
    kind = m.lastgroup
    if kind == "comment":
        return " "
    if kind == "exec":
        if depth >= _MAX_EXEC_DEPTH:
            return " "
        return " " + strip_comments(m.group("exec"), depth + 1) + " "
    return m.group()


def strip_comments(text: str, depth: int = 0) -> str:
    """`text` without comments, executable comments unwrapped, literals intact."""
    if "/*" in text or "#" in text or "--" in text:
        return _COMMENT_RE.sub(lambda m: _comment_token(m, depth), text).strip()
    return text


def split_statements(text: str) -> list[str]:
    """Split at each `;` outside literals and comments; empty pieces are dropped."""
    pieces = []
    start = 0
    for m in _SPLIT_RE.finditer(text):
        if m.lastgroup == "semi":
            pieces.append(text[start : m.start()])
            start = m.end()
    pieces.append(text[start:])
    return [p for p in (piece.strip(_STRIP) for piece in pieces) if p]


def unquote_string(literal: str) -> str:
    """The value of a quoted SQL string literal (MySQL escapes, doubled quotes)."""
    quote = literal[:1]
    body = literal[1:-1] if len(literal) >= 2 and literal[-1] == quote else literal[1:]
    body = body.replace(quote * 2, quote)
    if "\\" in body:
        body = _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)
    return body


# MySQL's backslash escapes; any other escaped character stands for itself.
_ESCAPE_RE = re.compile(r"\\(.)", re.S)
_ESCAPES = {"0": "\x00", "n": "\n", "r": "\r", "t": "\t", "b": "\b", "Z": "\x1a"}
