"""XML audit logs: MySQL Enterprise Audit and Percona's audit_log / audit_log_filter plugins.

Pure: no Django, no file opening. A log still being written has no `</AUDIT>`, so each record
is found by a scanner and parsed alone with ElementTree; a record never holds a DTD, so no entity
is expanded. Layouts (NEW, OLD) and how they are read: docs/formats.md, 'xml_audit'.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from functools import lru_cache

from ingest.parsers.audit_fields import login_status, outcome, parse_time, parse_user_host, to_int
from ingest.parsers.digits import clock_in
from ingest.parsers.records import (
    NO_HINTS,
    PROBLEM_EXCERPT_BYTES,
    Hints,
    Item,
    LogRecord,
    Problem,
    checked_integers,
)

__all__ = ["LABEL", "MAX_RECORD_BYTES", "NAME", "parse", "recognise", "time_digits"]

NAME = "xml-audit"
LABEL = "XML audit log (Percona, MySQL Enterprise)"
MAX_RECORD_BYTES = 16 << 20

_OPEN = b"<AUDIT_RECORD"
_CLOSE = b"</AUDIT_RECORD>"
_TAG_STRUCTURE = re.compile(rb'[">]')  # what matters inside a tag: quotes, and its end
# The rest of a tag up to its `>`, quoted values skipped (possessive: it never backtracks).
_TAG_REST = re.compile(rb'(?:[^">]++|"[^"]*+")*+>')
# What may stand between records: the XML declaration, the <AUDIT> element's tags, space.
# Possessive: `(?:\s+)*` alone is exponential once anything must follow the spaces.
_ENVELOPE = re.compile(rb"(?:\s++|<\?xml[^>]*\?>|<AUDIT>|</AUDIT>)*+")
# A line that is one whole OLD-layout record: `<AUDIT_RECORD name="value" .../>` and space
# around it. Values hold no `<`, `"` or control byte XML forbids; whatever else goes to
# the scanner below, which reads (or reports) it the long way. The servers write names in
# upper case; any other case goes the long way too (where names are upper-cased).
_WHOLE_OLD_LINE = re.compile(
    rb"""[ \t]*
    (<AUDIT_RECORD
      ((?:[ \t]+[A-Z_][A-Z0-9_.-]*[ \t]*=[ \t]*"[^"<\x00-\x08\x0b\x0c\x0e-\x1f]*")*)  # the attributes
    [ \t]*/>)
    [ \t]*\r?\n?""",
    re.VERBOSE,
)
# Characters XML 1.0 forbids (C0 controls but tab, newline, carriage return).
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
# NAMEs that are the general log's commands under the same name.
_COMMANDS = {"Connect", "Quit", "Query", "Change user", "Execute"}


def recognise(head: bytes) -> bool:
    """An XML audit log: its first KiB holds an `<AUDIT_RECORD` (after the `<AUDIT>` envelope)."""
    return _OPEN in head[:1024] and head.lstrip()[:1] == b"<"


class _Scanner:
    def __init__(self, start_offset: int, start_line: int) -> None:
        self.offset = start_offset
        self.line = start_line
        self.record: bytearray | None = None  # bytes of the record being read
        self.record_at = (0, 0)  # its (offset, line)
        self.mode = b""  # b"new" (element children) or b"old" (attributes); b"" until known
        self.in_quote = False  # inside an attribute value (old layout)
        self.skipping = False  # reading past the rest of a record too long to keep
        self.garbage: bytearray = bytearray()
        self.garbage_at = (0, 0)
        self.garbage_size = 0

    def feed(self, lines: Iterable[bytes]) -> Iterator[Item]:
        whole = _WHOLE_OLD_LINE.fullmatch
        for raw_line in lines:
            m = whole(raw_line) if self.record is None and not self.garbage else None
            if m is not None:
                # Common case: the line is one OLD-layout record and nothing else.
                yield _record(m[1], self.offset + m.start(1), self.line, _old_fields(m[2]))
            else:
                yield from self._line(raw_line)
            self.offset += len(raw_line)
            self.line += 1

    def finish(self) -> Iterator[Item]:
        if self.record is not None and not self.skipping:
            offset, line = self.record_at
            yield Problem(
                line, offset, bytes(self.record[:PROBLEM_EXCERPT_BYTES]), "unfinished record at the end"
            )
            self.record = None
        yield from self._flush_garbage()

    # -- scanning ------------------------------------------------------------------------------

    def _line(self, data: bytes) -> Iterator[Item]:
        pos = 0
        while pos < len(data):
            if self.record is None:
                start = data.find(_OPEN, pos)
                self._between(data[pos : start if start >= 0 else len(data)], pos)
                if start < 0:
                    return
                yield from self._flush_garbage()
                self.record = bytearray(_OPEN)
                self.record_at = (self.offset + start, self.line)
                self.mode, self.in_quote, self.skipping = b"", False, False
                pos = start + len(_OPEN)
                continue
            end = self._record_end(data, pos)
            restart = data.find(_OPEN, pos)
            if restart >= 0 and (end < 0 or restart < end):
                # A new record begins before this one ended: "<" cannot stand raw inside a
                # record, so this one is broken (a stray quote, cut short). Report, go on.
                if not self.skipping:
                    self.record += data[pos:restart]
                    offset, line = self.record_at
                    excerpt = bytes(self.record[:PROBLEM_EXCERPT_BYTES])
                    yield Problem(line, offset, excerpt, "not a readable audit record: it never ends")
                self.record, self.skipping = None, False
                pos = restart
                continue
            if end < 0:
                if not self.skipping:
                    self.record += data[pos:]
                    if len(self.record) > MAX_RECORD_BYTES:
                        yield self._too_long()
                return
            if self.skipping:  # the end of a record too long to keep, reported already
                self.record, self.skipping = None, False
                pos = end
                continue
            self.record += data[pos:end]
            raw, (offset, line) = bytes(self.record), self.record_at
            self.record = None
            yield _record(raw, offset, line)
            pos = end

    def _record_end(self, data: bytes, pos: int) -> int:
        """Where the record ends in data[pos:] (the index after it), or -1 if not on this line."""
        if not self.mode:
            rest = data[pos:].lstrip()
            if not rest:
                return -1
            self.mode = b"new" if rest[:1] == b">" else b"old"
        if self.mode == b"new":
            end = data.find(_CLOSE, pos)
            return end + len(_CLOSE) if end >= 0 else -1
        if not self.in_quote:
            # Common case: the tag ends on this line. One match finds its `>` past the quotes.
            m = _TAG_REST.match(data, pos)
            if m is not None:
                return self._tag_end(data, pos, m.end() - 1)
        for m in _TAG_STRUCTURE.finditer(data, pos):
            i = m.start()
            if data[i] == 0x22:  # "
                self.in_quote = not self.in_quote
            elif not self.in_quote:
                return self._tag_end(data, pos, i)
        return -1

    def _tag_end(self, data: bytes, pos: int, i: int) -> int:
        """The OLD layout's tag ends at data[i] (`>`): `/>` ends the record, else a body follows."""
        if data[i - 1 : i] == b"/" or (i == pos and self.record and self.record[-1:] == b"/"):
            return i + 1
        self.mode = b"new"  # <AUDIT_RECORD attr="..."> with children after all
        end = data.find(_CLOSE, i)
        return end + len(_CLOSE) if end >= 0 else -1

    def _between(self, data: bytes, pos: int) -> None:
        if not data:
            return
        m = _ENVELOPE.match(data)
        if m and m.end() == len(data) and not self.garbage:
            return
        if not self.garbage:
            self.garbage_at = (self.offset + pos, self.line)
        self.garbage_size += len(data)
        if len(self.garbage) < PROBLEM_EXCERPT_BYTES:
            self.garbage += data[: PROBLEM_EXCERPT_BYTES - len(self.garbage)]

    def _flush_garbage(self) -> Iterator[Item]:
        if self.garbage and self.garbage.strip():
            offset, line = self.garbage_at
            # Trailing envelope (e.g. "</AUDIT>") after the garbage is part of the same run.
            yield Problem(
                line, offset, bytes(self.garbage), f"not an audit record: {self.garbage_size} bytes"
            )
        self.garbage = bytearray()
        self.garbage_size = 0

    def _too_long(self) -> Problem:
        offset, line = self.record_at
        excerpt = bytes(self.record[:PROBLEM_EXCERPT_BYTES]) if self.record else b""
        self.record = bytearray()  # its bytes are dropped until it ends (self.skipping)
        self.skipping = True
        return Problem(line, offset, excerpt, f"record longer than {MAX_RECORD_BYTES} bytes: skipped")


# -- one record ------------------------------------------------------------------------------------


def _element(raw: bytes) -> ET.Element:
    if b"<!" in raw:
        raise ValueError("a record may not declare anything (<!...)")
    try:
        return ET.fromstring(raw)  # one record, no DTD: no entity can be declared
    except ET.ParseError:
        text = _FORBIDDEN.sub("", raw.decode("utf-8", "replace"))
        return ET.fromstring(text)


def _fields(element: ET.Element) -> tuple[dict[str, str], dict[str, str]]:
    """The record's fields (attributes, or child elements' text) and its connection attributes."""
    fields = {key.upper(): value for key, value in element.attrib.items()}
    attributes: dict[str, str] = {}
    for child in element:
        if child.tag == "CONNECTION_ATTRIBUTES":
            for attribute in child:
                name, value = attribute.findtext("NAME"), attribute.findtext("VALUE")
                if name:
                    attributes[name] = value or ""
        else:
            fields[child.tag.upper()] = child.text or ""
    return fields, attributes


# The OLD layout's record is one empty element with attributes: read it without building a
# tree (ElementTree costs about 25 µs a record). Split at the quotes, the record is its
# skeleton (the tag, the names and `=` between the values) and the values; the skeleton must
# match the grammar exactly. Anything this does not fully match (child elements, `<` in a
# value, an entity it does not know, a forbidden character, a duplicate attribute) goes to
# ElementTree, which either reads it or says why not.
_VALUE = "\x00"  # stands for each quoted value in the skeleton (XML forbids it in the text)
_SKELETON = re.compile(r"<AUDIT_RECORD(?:\s+[A-Za-z_][\w.-]*\s*=\s*\x00)*\s*/>\s*")
_NAME = re.compile(r"(?<![\w.-])([A-Za-z_][\w.-]*+)\s*=\s*\x00")  # from a name's start only
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]{1,7})|#x([0-9A-Fa-f]{1,6}));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_WHITESPACE = str.maketrans("\t\n\r", "   ")  # attribute-value normalisation (XML 1.0, 3.3.3)


def _entity(m: re.Match[str]) -> str:
    if m[1]:
        return _NAMED[m[1]]
    code = int(m[2]) if m[2] else int(m[3], 16)
    allowed = code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD
    if allowed or 0x10000 <= code <= 0x10FFFF:
        return chr(code)
    raise ValueError(f"character reference to {code:#x}, which XML forbids")


def _fast_fields(raw: bytes) -> dict[str, str] | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = text.split('"')
    if len(parts) % 2 == 0 or text.count("<") != 1 or _FORBIDDEN.search(text):
        return None  # an odd number of quotes, or `<` in a value (or a child element)
    skeleton = _VALUE.join(parts[0::2])
    if not _SKELETON.fullmatch(skeleton):
        return None
    names = _NAME.findall(skeleton.upper())  # (the skeleton holds no value: \x00 stands for each)
    values = parts[1::2]
    fields = dict(zip(names, values, strict=True))
    if len(fields) != len(names):
        return None  # a duplicate attribute: not well-formed
    if "&" in text or "\t" in text or "\n" in text or "\r" in text:
        return _normalised(fields)
    return fields


def _normalised(fields: dict[str, str]) -> dict[str, str] | None:
    """Attribute values as XML reads them: white space as spaces, entities replaced; None
    when a value holds an entity we do not know (ElementTree will say why)."""
    for name, value in fields.items():
        if "\t" in value or "\n" in value or "\r" in value:
            value = value.translate(_WHITESPACE)
        if "&" in value:
            try:
                unescaped = _ENTITY.sub(_entity, value)
            except ValueError:  # a reference to a character XML forbids (&#0;): ElementTree says why
                return None
            if "&" in _ENTITY.sub("", value):
                return None
            value = unescaped
        fields[name] = value
    return fields


@lru_cache(maxsize=4096)  # records repeat their connection's account: each is read once
def _who(user_field: str, priv_user: str, host_field: str, ip_field: str) -> tuple[str | None, ...]:
    """(user, account, host, ip): USER is a bare name (Connect records, with PRIV_USER the
    account) or `priv_user[user] @ host [ip]`; HOST and IP, where given, come first."""
    user_field = user_field.strip()
    split = parse_user_host(user_field) if user_field else None
    split = split if split and any(split) else None
    account = priv_user.strip() or (split.account if split else None)
    user = (split.user if split else user_field) or account
    host = host_field.strip() or (split.host if split else None)
    ip = ip_field.strip() or (split.ip if split else None)
    return user or None, account, host or None, ip or None


def _old_fields(attributes: bytes) -> dict[str, str] | None:
    """The attributes of a one-line OLD record (`_WHOLE_OLD_LINE`), or None to read it the long way.

    The match vouches for their shape (`NAME="value"`, no quote inside a value), so split at
    the quotes the text alternates between ` NAME=` and a value, and ends after a quote."""
    try:
        text = attributes.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = text.split('"')
    names = "".join(parts[0::2]).replace("=", " ").split()  # (names hold no space, tab or =)
    values = parts[1::2]
    fields = dict(zip(names, values, strict=False))
    if len(fields) != len(names) or len(names) != len(values):
        return None  # a duplicate attribute: not well-formed, ElementTree will say
    if "&" in text or "\t" in text:
        return _normalised(fields)
    return fields


def _record(raw: bytes, offset: int, line: int, fields: dict[str, str] | None = None) -> Item:
    attributes: dict[str, str] = {}
    try:
        if fields is None:
            fields = _fast_fields(raw)
        if fields is None:
            fields, attributes = _fields(_element(raw))
    except (ET.ParseError, ValueError) as error:
        return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], f"not a readable audit record: {error}")
    # The fields a record has are taken out one by one (the dict is ours): what is left is extra.
    pop = fields.pop
    name = pop("NAME", "").strip()
    user, account, host, ip = _who(
        pop("USER", ""), fields.get("PRIV_USER", ""), pop("HOST", ""), pop("IP", "")
    )
    status = pop("STATUS", None)
    status = "ok" if status == "0" else outcome(status)  # (nearly every record: "0")
    when_text = pop("TIMESTAMP", "")
    connection_id = pop("CONNECTION_ID", None)
    if connection_id is not None:
        try:
            connection_id = int(connection_id)  # (nearly every record: digits alone)
        except ValueError:
            connection_id = to_int(connection_id)
    sql = pop("SQLTEXT", "")
    database = pop("DB", "").strip() or None
    extra = {key.lower(): value for key, value in fields.items() if value}
    extra["layout"] = "xml"
    if account:
        extra["account"] = account
    if attributes:
        for key in ("program_name", "_os", "_client_name", "_pid"):
            if attributes.get(key):
                extra[f"attr{key}" if key.startswith("_") else key] = attributes[key]
    when = parse_time(when_text) if when_text else None
    if when_text and when is None:
        extra["invalid_time"] = when_text
    command = name if name in _COMMANDS else (name or "Unknown")
    if command == "Connect":
        status = login_status(command, status, extra)  # a refused login: its code in extra
    # Positional, in LogRecord's field order (keywords cost more, on every record).
    return LogRecord(
        line, offset, raw, when, connection_id, command, sql.encode("utf-8", "surrogateescape"),
        user or None, host or None, ip or None, database, status, None, extra,
    )  # fmt: skip


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Iterator[Item]:
    """Every record and problem of an XML audit log, in order (docs/formats.md, 'xml_audit')."""
    scanner = _Scanner(start_offset, start_line)
    yield from checked_integers(scanner.feed(lines))
    yield from checked_integers(scanner.finish())


_STAMP = re.compile(rb'TIMESTAMP\s*(?:=\s*"|>)([^"<]{1,64})')  # an attribute or an element


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of the record's TIMESTAMP (None when the head shows none)."""
    stamp = _STAMP.search(head)
    return clock_in(stamp.group(1)) if stamp else None
