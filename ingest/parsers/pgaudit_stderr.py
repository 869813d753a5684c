"""pgAudit in PostgreSQL's plain stderr log, read through its `log_line_prefix`. Pure: no Django.

The prefix must name the time (%m, %t or %n), the user (%u), the database (%d) and the
session (%c); %p, %l, %v, %x, %e, %a, %h, %r, %i, %b, %s, %P, %Q and %q may stand anywhere
(%q: lines of processes without a session stop there). A text escape (%u, %d, %a, %h, %r,
%i, %b) must be followed by a literal character that its values do not hold (the server does
not quote them): a user name with that character makes its lines problems, never misread
ones. csvlog and jsonlog have no such limit and are the recommended set-up.

The prefix comes from `hints.log_line_prefix` when the caller knows it; otherwise the first
of KNOWN_PREFIXES that reads the file's first line is used. A prefix without %u, %d, %c or a
time is refused with a Problem naming what is missing (the PostgreSQL default `%m [%p] ` and
Debian's `%m [%p] %q%u@%d ` name no session).

A message is its prefixed line, the lines after it that begin with a tab (the server writes
a newline inside a message as newline + tab), and the DETAIL, HINT, CONTEXT, STATEMENT, QUERY
and LOCATION lines of the same process that follow it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ingest.parsers.pgaudit import DIALECT, MAX_MESSAGE_BYTES, Resumer, ServerLine, assemble, time_digits
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, Problem

__all__ = [
    "DIALECT",
    "KNOWN_PREFIXES",
    "LABEL",
    "NAME",
    "UnsupportedPrefix",
    "compile_prefix",
    "parse",
    "prefix_problem",
    "recognise",
    "resumable",
    "time_digits",
]

NAME = "pgaudit-stderr"
LABEL = "PostgreSQL stderr log with pgAudit"

# Prefixes tried, in order, when the caller does not name one (the first is the recommended).
KNOWN_PREFIXES = (
    "%m [%p] %q%u@%d %h %c %l %v %a ",
    "%m [%p] %q%u@%d %c %l %v %a ",
    "%m [%p] %q%u@%d %c %l %a ",
    "%m [%p] %q%u@%d %c %a ",
    "%m [%p] %q%u@%d %c ",
    "%t [%p] %q%u@%d %c %l %a ",
    "%m %c %l %q%u@%d %a ",
)
_TIME = r"\d{4}-\d{2}-\d{2}\x20\d{2}:\d{2}:\d{2}"
# Each escape's pattern; None marks free text (bounded by the literal after it).
_ESCAPES: dict[str, str | None] = {
    "m": rf"(?P<time>{_TIME}\.\d{{3}}(?:\x20[^\x20\n]{{1,32}})?)",
    "t": rf"(?P<time>{_TIME}(?:\x20[^\x20\n]{{1,32}})?)",
    "n": r"(?P<epoch>\d{1,12}\.\d{3})",
    "s": rf"{_TIME}(?:\x20[^\x20\n]{{1,32}})?",
    "p": r"(?P<pid>\d{1,10})",
    "P": r"\d{0,10}",
    "l": r"(?P<session_line>\d{1,19})",
    "c": r"(?P<session>[0-9a-f]{1,16}\.[0-9a-f]{1,16})",
    "v": r"(?P<vxid>(?:-?\d{1,10}/\d{1,20})?)",
    "x": r"\d{0,20}",
    "e": r"(?P<sqlstate>[0-9A-Z]{5})",
    "Q": r"-?\d{1,20}",
    "u": None,
    "d": None,
    "a": None,
    "h": None,
    "r": None,
    "i": None,
    "b": None,
}
_GROUPS = {"u": "user", "d": "database", "a": "application", "h": "host", "r": "host", "i": "tag"}
_REQUIRED = (("u", "%u (user)"), ("d", "%d (database)"), ("c", "%c (session id)"))
_ATTACHED = frozenset({"DETAIL", "HINT", "CONTEXT", "STATEMENT", "QUERY", "LOCATION"})
_TAIL = r"(?P<severity>[A-Z][A-Z0-9]{1,9}):\x20\x20(?P<message>[^\n]*)"


class UnsupportedPrefix(ValueError):
    """A log_line_prefix AuditWeb cannot read pgAudit lines with; the message says why."""


@dataclass(frozen=True, slots=True)
class Prefix:
    text: str
    line_re: re.Pattern[str]


def compile_prefix(prefix: str) -> Prefix:
    """The line pattern of a log_line_prefix, or UnsupportedPrefix naming what is missing."""
    tokens: list[tuple[str, str]] = []  # ("esc", letter) or ("lit", text)
    i = 0
    while i < len(prefix):
        c = prefix[i]
        if c == "%" and i + 1 < len(prefix):
            letter = prefix[i + 1]
            i += 2
            if letter == "%":
                tokens.append(("lit", "%"))
            elif letter == "q" or letter in _ESCAPES:
                tokens.append(("esc", letter))
            elif letter.isdigit() or letter == "-":
                raise UnsupportedPrefix(
                    f"log_line_prefix {prefix!r}: padded escapes (%{letter}...) are not read"
                )
            else:
                tokens.append(("lit", ""))  # the server prints nothing for an unknown escape
            continue
        tokens.append(("lit", c))
        i += 1
    letters = {t for kind, t in tokens if kind == "esc"}
    missing = [name for letter, name in _REQUIRED if letter not in letters]
    if not letters & {"m", "t", "n"}:
        missing.insert(0, "a time (%m, %t or %n)")
    if missing:
        raise UnsupportedPrefix(
            f"log_line_prefix {prefix!r} names no {', no '.join(missing)}: pgAudit lines cannot be"
            " told apart by session without them (use csvlog or jsonlog, or a prefix such as"
            f" {KNOWN_PREFIXES[0]!r})"
        )
    parts: list[str] = []
    optional = False
    seen: set[str] = set()
    for n, (kind, value) in enumerate(tokens):
        if kind == "lit":
            parts.append(re.escape(value))
            continue
        if value == "q":
            parts.append("(?:")
            optional = True
            continue
        pattern = _ESCAPES[value]
        if pattern is None:
            after = next((v for k, v in tokens[n + 1 :] if k == "lit" and v), None)
            follows = tokens[n + 1] if n + 1 < len(tokens) else None
            if after is None or follows is None or follows[0] != "lit":
                raise UnsupportedPrefix(
                    f"log_line_prefix {prefix!r}: %{value} must be followed by a separator character"
                )
            group = _GROUPS.get(value)
            body = rf"[^{re.escape(after[0])}\n]*+"
            pattern = f"(?P<{group}>{body})" if group and group not in seen else body
            if group:
                seen.add(group)
        elif "(?P<" in pattern:
            name = pattern[4 : pattern.index(">")]
            if name in seen:
                pattern = re.sub(r"\(\?P<\w+>", "(?:", pattern, count=1)
            seen.add(name)
        parts.append(pattern)
    if optional:
        parts.append(")?")
    return Prefix(prefix, re.compile("".join(parts) + _TAIL))


_CACHE: dict[str, Prefix] = {}


def _prefix(text: str) -> Prefix:
    if text not in _CACHE:
        _CACHE[text] = compile_prefix(text)
    return _CACHE[text]


# Stock prefixes that name no session: recognised so that the refusal can say so.
_NO_SESSION_RE = re.compile(rb"\A\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})? [^ \n]{1,32} \[\d+\] ")


def prefix_problem(prefix: str) -> str | None:
    """Why a log_line_prefix a source is given cannot read pgAudit lines (what it lacks), or None."""
    try:
        compile_prefix(prefix)
    except UnsupportedPrefix as error:
        return str(error)
    return None


def recognise(head: bytes) -> bool:
    """A stderr log one of KNOWN_PREFIXES reads (its first line), or a stock prefix without a
    session id (claimed, so that the parser can say what is missing)."""
    first = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].decode("utf-8", "replace")
    if any(_prefix(p).line_re.match(first) for p in KNOWN_PREFIXES):
        return True
    return _NO_SESSION_RE.match(head) is not None and b"  " in head.split(b"\n", 1)[0]


def _choose(first: str, hints: object | None) -> Prefix | str:
    given = getattr(hints, "log_line_prefix", None)
    if isinstance(given, str) and given:
        try:
            return _prefix(given)
        except UnsupportedPrefix as error:
            return str(error)
    for text in KNOWN_PREFIXES:
        p = _prefix(text)
        if p.line_re.match(first):
            return p
    return (
        "the log_line_prefix of this stderr log is none AuditWeb knows"
        f" ({', '.join(repr(p) for p in KNOWN_PREFIXES)}); if it names the time, %u, %d and %c,"
        " give it as the source's log_line_prefix; a prefix without a session id (%c), such as"
        " PostgreSQL's default '%m [%p] ', cannot be read"
    )


@dataclass(slots=True)
class _Message:
    line: int
    offset: int
    raw: list[bytes]
    size: int
    fields: dict[str, str | None]
    text: list[str]
    extra: dict[str, str]  # DETAIL, STATEMENT... by severity
    last: str  # which part the continuation lines extend: "message" or an attached severity


def _server_line(m: _Message) -> ServerLine | Problem:
    raw = b"".join(m.raw)
    if m.size > MAX_MESSAGE_BYTES:
        return Problem(
            m.line, m.offset, raw[:PROBLEM_EXCERPT_BYTES], f"message longer than {MAX_MESSAGE_BYTES} bytes"
        )
    f = m.fields
    pid = f.get("pid")
    session_line = f.get("session_line")
    time = f.get("time")
    if time is None and f.get("epoch"):
        time = None  # (an epoch time is read below)
    return ServerLine(
        line=m.line,
        offset=m.offset,
        raw=raw,
        time=time,
        user=_field(f.get("user")),
        database=_field(f.get("database")),
        pid=int(pid) if pid else None,
        host=_host(f.get("host")),
        session=f.get("session"),
        session_line=int(session_line) if session_line else None,
        vxid=f.get("vxid") or None,
        tag=_field(f.get("tag")),
        severity=f.get("severity") or "",
        sqlstate=f.get("sqlstate"),
        message="\n".join(m.text),
        detail=m.extra.get("DETAIL"),
        statement=m.extra.get("STATEMENT"),
        application=_field(f.get("application")),
    )


def _field(value: str | None) -> str | None:
    return None if value in (None, "", "[unknown]") else value


def _host(value: str | None) -> str | None:
    value = _field(value)
    if value and value.endswith(")") and "(" in value:  # %r: host(port)
        value = value[: value.rindex("(")]
    return value


def _lines(
    lines: Iterable[bytes], offset: int, number: int, hints: object | None
) -> Iterator[ServerLine | Problem]:
    prefix: Prefix | None = None
    current: _Message | None = None
    for raw in lines:
        here, line = offset, number
        offset += len(raw)
        if raw.endswith(b"\n"):
            number += 1
        text = raw.decode("utf-8", "surrogateescape").rstrip("\r\n")
        if raw[:1] == b"\t" and current is not None:
            current.raw.append(raw)
            current.size += len(raw)
            if current.size <= MAX_MESSAGE_BYTES:
                if current.last == "message":
                    current.text.append(text[1:])
                else:
                    current.extra[current.last] += "\n" + text[1:]
            continue
        if prefix is None:
            if not text.strip():
                continue
            chosen = _choose(text, hints)
            if isinstance(chosen, str):
                yield Problem(line, here, raw[:PROBLEM_EXCERPT_BYTES], chosen)
                return
            prefix = chosen
        m = prefix.line_re.match(text) if len(text) <= MAX_MESSAGE_BYTES else None
        if m is None:
            if current is not None:
                yield _server_line(current)
                current = None
            if text.strip():
                reason = (
                    "a line the log_line_prefix does not read"
                    if len(text) <= MAX_MESSAGE_BYTES
                    else (f"line longer than {MAX_MESSAGE_BYTES} bytes")
                )
                yield Problem(line, here, raw[:PROBLEM_EXCERPT_BYTES], f"{reason} ({prefix.text!r})")
            continue
        fields = m.groupdict()
        severity = fields["severity"]
        if (
            current is not None
            and severity in _ATTACHED
            and fields.get("pid") == current.fields.get("pid")
            and fields.get("session") == current.fields.get("session")
        ):
            current.raw.append(raw)
            current.size += len(raw)
            current.extra[severity] = fields["message"] or ""
            current.last = severity
            continue
        if current is not None:
            yield _server_line(current)
        current = _Message(line, here, [raw], len(raw), fields, [fields["message"] or ""], {}, "message")
    if current is not None:
        yield _server_line(current)


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: object | None = None
) -> Iterator[Item]:
    """Every record and problem of a pgAudit stderr log, in order. `hints.log_line_prefix`, when
    the caller has it, names the prefix (see the module docstring)."""
    yield from assemble(_lines(lines, start_offset, start_line, hints))


def resumable(*, start_offset: int = 0, start_line: int = 1, hints: object | None = None) -> Resumer:
    """A parser that says where to resume (ingest.parsers.pgaudit.Resumer); `hints` as for parse."""
    return Resumer(lambda lines, offset, line: _lines(lines, offset, line, hints), start_offset, start_line)
