"""Log text made safe for each kind of report. Pure functions: no Django.

Everything here comes from logs someone else wrote (an attacker, possibly): a CSV cell must not
become a spreadsheet formula, PDF markup must not be injected, and bytes that do not print
must show as what they are instead of passing for the text they resemble.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from xml.sax.saxutils import escape

# A spreadsheet reads a cell beginning with one of these as a formula (or its start).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Control characters other than newline; DEL and the C1 controls; the Unicode line and
# paragraph separators and the bidirectional overrides that can reorder what a reader sees.
_INVISIBLE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)


def csv_cell(value: object) -> object:
    """A CSV cell that no spreadsheet runs: text starting like a formula gets a leading
    apostrophe (the usual neutraliser, shown by spreadsheets as text). Numbers pass."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def visible(text: str) -> str:
    """Non-printing characters written as \\xNN or \\u{NNNN}, so that they are seen."""
    return _INVISIBLE.sub(_escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{{{code:04x}}}"


def pdf_markup(text: str, *, code_font: str | None = None, latin1_only: bool = True) -> str:
    """Log text as reportlab Paragraph markup: XML-escaped, line breaks kept, runs of spaces
    kept, non-printing characters (and, with the standard fonts, characters they cannot draw)
    shown as highlighted escapes."""
    out: list[str] = []
    for line_no, line in enumerate(text.split("\n")):
        if line_no:
            out.append("<br/>")
        start = 0
        for match in _shown_escaped(line, latin1_only):
            out.append(_spaces(escape(line[start : match.start()])))
            code = ord(match.group())
            shown = f"\\x{code:02x}" if code < 0x100 else f"\\u{{{code:04x}}}"
            out.append(f'<font color="#ffffff" backColor="#7a4b00">{shown}</font>')
            start = match.end()
        out.append(_spaces(escape(line[start:])))
    return "".join(out)


_NOT_LATIN1 = re.compile("[^\x00-\xff]")


def _shown_escaped(line: str, latin1_only: bool) -> list[re.Match[str]]:
    found = list(_INVISIBLE.finditer(line))
    if latin1_only:
        found += [m for m in _NOT_LATIN1.finditer(line) if not _INVISIBLE.fullmatch(m.group())]
        found.sort(key=lambda m: m.start())
    return found


def _spaces(text: str) -> str:
    """Keep indentation and runs of spaces (Paragraph collapses them) while letting lines wrap."""
    return text.replace("  ", " &nbsp;")


def printable_latin1(text: str) -> str:
    """Text for the standard PDF fonts drawn as is: non-printing characters, and characters those
    fonts cannot draw (outside Latin-1), written as \\xNN or \\u{NNNN}."""
    return _NOT_DRAWABLE.sub(_escape_char, text)


_NOT_DRAWABLE = re.compile(_INVISIBLE.pattern[:-1] + "\u0100-\U0010ffff]")


# Where a long token (a server label, a path, a session key, user@host) may be broken: after
# these characters, which end a part of it, never between two letters of one part.
BREAK_AFTER = frozenset("-_./\\:@,;=)]}")


def wrap_mono(text: str, width: int) -> list[str]:
    """Lines of at most `width` characters (a monospaced font): a line is broken after its last
    space when there is one in its second half, else after its last separator there (a path's
    `/`, a label's `-`: see BREAK_AFTER), else at `width`; line breaks are kept."""
    lines: list[str] = []
    for line in text.split("\n"):
        while len(line) > width:
            cut = line.rfind(" ", width // 2, width + 1)
            if cut < 0:
                cut = next((i for i in range(width - 1, width // 2 - 1, -1) if line[i] in BREAK_AFTER), -1)
            cut = cut + 1 if cut > 0 else width
            lines.append(line[:cut].rstrip(" ") or line[:cut])
            line = line[cut:]
        lines.append(line)
    return lines


def break_token(token: str, fits: Callable[[str], bool]) -> list[str]:
    """`token` in pieces that each fit (`fits(piece)`), cut after the last separator that keeps
    the piece fitting: "demo-general-log" gives "demo-general-" and "log", never "demo-general-lo"
    and "g". Only a part with no separator at all that does not fit alone is cut where it must.
    Linear in practice: each cut scans back from where the piece stops fitting."""
    pieces: list[str] = []
    while token and not fits(token):
        longest = _longest_fitting(token, fits)
        cut = next((i for i in range(longest, 0, -1) if token[i - 1] in BREAK_AFTER), 0)
        cut = cut or longest
        pieces.append(token[:cut])
        token = token[cut:]
    if token or not pieces:
        pieces.append(token)
    return pieces


def _longest_fitting(token: str, fits: Callable[[str], bool]) -> int:
    """The length of the longest prefix of `token` that fits (at least one character): a binary
    search, since a longer prefix is never narrower."""
    low, high = 1, len(token)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(token[:middle]):
            low = middle
        else:
            high = middle - 1
    return low


def unbreakable_parts(text: str) -> list[str]:
    """The parts of `text` that `break_token` will not cut when it can help it: its words split
    after every separator."""
    parts: list[str] = []
    for word in text.split():
        start = 0
        for i, char in enumerate(word):
            if char in BREAK_AFTER:
                parts.append(word[start : i + 1])
                start = i + 1
        if start < len(word):
            parts.append(word[start:])
    return parts


def gap_reason(reason: str, detail: str) -> str:
    """A gap's reason and what shows it, said once: the stored detail often begins with the
    reason's own words ("logging switched off by 'SET GLOBAL general_log = OFF'")."""
    detail = " ".join(detail.split())
    if not detail:
        return reason
    if detail.lower().startswith(reason.lower()) or reason.lower() in detail.lower():
        return detail
    return f"{reason}: {detail}"
