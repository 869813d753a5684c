"""Masking the secrets a logged statement carries, the way MariaDB's server_audit does (`*****`).

Pure Python (no Django). Every secret-bearing clause is masked before the statement is
classified or stored, so nothing made from `Event.sql` holds the secret. One pass of one
tokenizing regex, literals rescanned at most `MAX_DEPTH` deep: linear time. What is masked:
README, "Passwords and keys in the logs"; how and why: docs/architecture.md, "Secrets in the logs".
"""

from __future__ import annotations

import re

from ingest.sql.lexer import DOUBLE_QUOTED, SINGLE_QUOTED, unquote_string

MASK = "*****"
MAX_DEPTH = 3  # literals inside literals re-scanned (each level scans its text once)

# A cheap test before any tokenizing: every clause masked here has one of these words, or is
# inside a hex or bit literal (which the server reads as a string). Plain substring tests on
# the lower-cased text: a case-insensitive regex alternation costs ~20 µs on a 100-character
# statement (no literal prefix to scan for), these well under 1 µs.
_TRIGGER_WORDS = ("identified", "password", "crypt", "encode", "decode", "authentication_string")
_LITERAL_HEADS = ("x'", "b'", "0x", "0b")
# Where such a literal begins: `x'`, `b'` (any case) not inside a word or after a quote, `0x`, `0b`
# not inside a word or a number. Each branch starts with its fixed character and looks behind it
# from there (`(?<![\w'])[xXbB]'` begins with the look-behind, which the `re` engine then tries
# at every position of the text: 8 us a statement of 100 characters instead of 1).
_LITERAL_START = re.compile(r"[xXbB](?<![\w'][xXbB])'|0(?<![\w.]0)[xb]")


def _has_trigger_word(text: str) -> bool:
    return _has_trigger_in(text.lower())


def _has_trigger_in(low: str) -> bool:
    """_TRIGGER_WORDS in lower-cased text, spelt out: `any()` over a generator cost twice as much
    per statement (it runs on every statement of every log)."""
    return (
        "identified" in low
        or "password" in low
        or "crypt" in low
        or ("code" in low and ("encode" in low or "decode" in low))  # one scan for the two
        or "authentication_string" in low
    )


def _may_hold_secret(sql: str) -> bool:
    """Whether `sql` has a trigger word or a hex or bit literal: False says _mask would leave it as
    it is (a superset of what it masks; it runs on every new statement text of every log)."""
    low = sql.lower()
    if _has_trigger_in(low):
        return True
    if "x'" in low or "b'" in low or "0x" in low or "0b" in low:  # _LITERAL_HEADS
        return _LITERAL_START.search(sql) is not None
    return False


_TOKEN = re.compile(
    rf"""
      (?P<str> (?:[nN]|_[A-Za-z0-9]+)? (?:{SINGLE_QUOTED}|{DOUBLE_QUOTED}) )   # 'x', N'x', _utf8mb4'x'
    | (?P<hex> [xX]'[^']*(?:'|\Z) | 0x[0-9a-fA-F]+ )                           # X'41', 0x41
    | (?P<bits> [bB]'[^']*(?:'|\Z) | 0b[01]+ )                                  # B'01', 0b01
    | (?P<ident> `[^`]*(?:``[^`]*)*(?:`|\Z) )                                   # `name`
    | (?P<exec> /\*M?!(?:[0-9]{{5,6}})? | \*/ )        # executable comment: its content is SQL
    | (?P<comment> /\*.*?(?:\*/|\Z) | --(?=[\x00-\x20]|\Z)[^\n]* | \#[^\n]* )
    | (?P<word> [\w$]+ )
    | (?P<space> \s+ )
    | (?P<punct> . )
    """,
    re.X | re.S,
)

# Functions whose arguments from the given one on are secrets (0: all of them).
_SECRET_FUNCTIONS = {
    "PASSWORD": 0,
    "OLD_PASSWORD": 0,
    "AES_ENCRYPT": 1,
    "AES_DECRYPT": 1,
    "DES_ENCRYPT": 1,
    "DES_DECRYPT": 1,
    "ENCODE": 1,
    "DECODE": 1,
}
_PASSWORD_WORDS = ("PASSWORD", "OLD_PASSWORD", "AUTHENTICATION_STRING")
# Words after PASSWORD that begin an option, not a value (PASSWORD EXPIRE, HISTORY 5...).
_VALUE_KINDS = frozenset({"str", "hex", "bits", "ident"})
_MAX_FRAMES = 64

# States of the clause being read.
_NONE, _ID, _PLUGIN, _ARMED, _LENIENT, _WAIT_EQ, _RANDOM, _STARS = range(8)


def mask_secrets(sql: str) -> str:
    """`sql` with every secret it carries replaced by `*****`; `sql` itself when it holds none."""
    if not _may_hold_secret(sql):
        return sql
    masked = _mask(sql, 0)
    return sql if masked == sql else masked


def _is_number(word: str) -> bool:
    return word[:1].isdigit()


def _mask(text: str, depth: int) -> str:
    """One pass over the tokens (see the module). Spans to mask are collected, then joined."""
    out: list[str] = []
    pos = 0  # text[:pos] is in `out`
    state = _NONE
    random_span: tuple[int, int] | None = None
    prev_word = ""  # the last word (upper case) before this token, for SET PASSWORD
    pending_fn: int | None = None  # a secret function's first masked argument, before its "("
    frames: list[list[int]] = []  # [depth at its "(", argument number, first masked argument]
    paren = 0
    last_end = -1  # where the last token ended
    stars_at = 0  # where server_audit's `*****` began

    def replace(start: int, end: int, new: str) -> None:
        nonlocal pos
        out.append(text[pos:start])
        out.append(new)
        pos = end

    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind in ("space", "exec"):
            continue
        token = m.group()
        start, end = m.span()
        if kind == "comment":
            if depth < MAX_DEPTH and _has_trigger_word(token):
                inner = _mask_comment(token, depth)
                if inner != token:
                    replace(start, end, inner)
            continue
        upper = token.upper() if kind == "word" else ""
        value = kind in _VALUE_KINDS or (kind == "word" and _is_number(token))
        adjacent, last_end = start == last_end, end
        # 1. Secret functions: PASSWORD('x'), AES_ENCRYPT(data, 'key').
        if pending_fn is not None:
            first = pending_fn
            pending_fn = None
            if token == "(" and len(frames) < _MAX_FRAMES:
                paren += 1
                frames.append([paren, 0, first])
                if state == _LENIENT:
                    state = _NONE
                continue
        if token == "(":
            paren += 1
        elif token == ")":
            while frames and frames[-1][0] >= paren:
                frames.pop()
            paren = max(paren - 1, 0)
        elif token == "," and frames and frames[-1][0] == paren:
            frames[-1][1] += 1
        elif token == ";":
            frames.clear()
            paren = 0
        in_secret_args = any(f[1] >= f[2] for f in frames)
        # 2. The clause state machine.
        masked = False
        if state == _STARS:
            # server_audit's own mask (`BY *****`) is cut short by a quote escaped inside the
            # password: `BY *****'rest'`. What sticks to the stars is part of the value.
            if token == "*" and adjacent:
                continue
            state = _ID
            if adjacent and (value or kind == "word"):
                replace(stars_at, end, MASK)
                continue
        if state == _RANDOM:
            state = _ID
            if upper == "PASSWORD":  # IDENTIFIED BY RANDOM PASSWORD: no secret in the log
                state = _NONE
                prev_word = upper
                continue
            assert random_span is not None
            replace(*random_span, MASK)
        if state == _ID:
            if upper in ("BY", "AS", "USING", "REPLACE"):
                state = _ARMED
                prev_word = upper
                continue
            if upper in ("WITH", "VIA", "OR"):
                state = _PLUGIN
                prev_word = upper
                continue
            state = _NONE
        elif state == _PLUGIN:
            state = _ID if (value or kind == "word") else _NONE
            if state == _ID:
                prev_word = upper
                continue
        elif state == _ARMED:
            if kind == "word" and (upper in _PASSWORD_WORDS or token.startswith("_")):
                if upper in _SECRET_FUNCTIONS:
                    pending_fn = _SECRET_FUNCTIONS[upper]
                prev_word = upper
                continue  # BY PASSWORD '*hash', USING PASSWORD('x'), _utf8mb4 'x'
            if token in ("(", "="):
                continue
            if upper == "RANDOM":
                state, random_span = _RANDOM, (start, end)
                continue
            if token == "*":
                state, stars_at = _STARS, start
                continue
            if value or kind == "word":
                masked = True
                state = _ID
            else:
                state = _NONE
        elif state == _LENIENT:
            if token == "=":
                continue
            if kind == "word" and token.startswith("_"):
                continue
            if upper == "FOR":
                state = _WAIT_EQ
                continue
            if value:
                masked = True
                state = _ID  # SET PASSWORD = 'new' REPLACE 'current'
            else:
                state = _NONE
        elif state == _WAIT_EQ:
            if token == "=":
                state = _ARMED
                continue
            if token == ";":
                state = _NONE
        if not masked and in_secret_args and value:
            masked = True
        if masked:
            replace(start, end, MASK)
            prev_word = ""
            continue
        # 3. What this token starts.
        if kind == "word":
            if upper == "IDENTIFIED":
                state = _ID
            elif upper in _PASSWORD_WORDS or upper.endswith("_PASSWORD"):
                state = _WAIT_EQ if prev_word == "SET" else _LENIENT
            if upper in _SECRET_FUNCTIONS:
                pending_fn = _SECRET_FUNCTIONS[upper]
            prev_word = upper
        elif kind in ("str", "hex", "bits") and depth < MAX_DEPTH:
            inner = _mask_literal(kind, token, depth)
            if inner is not None:
                replace(start, end, inner)
        elif token == ";":
            state, prev_word = _NONE, ""
    if state == _RANDOM and random_span is not None:
        replace(*random_span, MASK)
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _mask_comment(token: str, depth: int) -> str:
    """A comment's text masked as SQL (a secret written in a comment is still one)."""
    if token.startswith("/*"):
        closed = len(token) >= 4 and token.endswith("*/")
        body = token[2:-2] if closed else token[2:]
        return "/*" + _mask(body, depth + 1) + ("*/" if closed else "")
    head = 1 if token.startswith("#") else 2
    return token[:head] + _mask(token[head:], depth + 1)


def _mask_literal(kind: str, token: str, depth: int) -> str | None:
    """A literal that holds a secret-bearing clause (a statement text to PREPARE, or kept in a
    variable), with the clause masked and quoted again; None when it holds none."""
    if kind == "str":
        if not _has_trigger_word(token):
            return None
        quote_at = min(i for i in (token.find("'"), token.find('"')) if i >= 0)
        prefix, literal = token[:quote_at], token[quote_at:]
        value = unquote_string(literal)
        masked = _mask(value, depth + 1)
        if masked == value:
            return None
        q = literal[0]
        return prefix + q + masked.replace("\\", "\\\\").replace(q, q + q) + q
    digits = token[2:].rstrip("'") if token[1:2] == "'" else token[2:]
    try:
        if kind == "hex":
            data = bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
        else:
            number = int(digits or "0", 2)
            data = number.to_bytes((len(digits) + 7) // 8, "big")
    except ValueError:
        return None
    value = data.decode("utf-8", "replace")
    if not _has_trigger_word(value):
        return None
    masked = _mask(value, depth + 1)
    if masked == value:
        return None
    return "X'" + masked.encode("utf-8").hex().upper() + "'"


# Raw log bytes are the statement as the log format wrote it (CSV doubles quotes, JSON escapes
# them, XML writes entities), so they cannot be masked by the SQL tokenizer above without the
# format's decoding. What non-admins see of a masked event's raw bytes is cut instead, at the
# first place a secret can begin: a word that introduces one, or a hex or bit literal.
_RAW_CUT = re.compile(
    rb"identified|password|crypt|encode|decode|authentication_string"
    rb"|(?P<literal>(?<![\w'])[xXbB]'|(?<![\w.])0[xXb])",
    re.I,
)
RAW_CUT_MARK = b"***** (the rest of this record is withheld: it holds a secret)"


def raw_may_hold_secret(raw: bytes) -> bool:
    return _RAW_CUT.search(raw) is not None


def masked_raw(raw: bytes) -> bytes:
    """`raw` cut where a secret may begin: the start kept, the rest replaced by RAW_CUT_MARK;
    only the mark when nothing shows where (the secret was in an encoded literal)."""
    m = _RAW_CUT.search(raw)
    if m is None:
        return RAW_CUT_MARK
    cut = m.start() if m.group("literal") else m.end()
    return raw[:cut] + b" " + RAW_CUT_MARK
