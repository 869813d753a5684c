"""Log text made safe for each kind of report. Pure functions: no Django.

Everything here comes from logs someone else wrote (an attacker, possibly): a CSV cell must not
become a spreadsheet formula, PDF markup must not be injected, and bytes that do not print
must show as what they are instead of passing for the text they resemble.
"""

from __future__ import annotations

import re
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


def wrap_mono(text: str, width: int) -> list[str]:
    """Lines of at most `width` characters (a monospaced font): a line is broken after its last
    space when there is one in its second half, else at `width`; line breaks are kept."""
    lines: list[str] = []
    for line in text.split("\n"):
        while len(line) > width:
            cut = line.rfind(" ", width // 2, width + 1)
            cut = cut + 1 if cut > 0 else width
            lines.append(line[:cut].rstrip(" ") or line[:cut])
            line = line[cut:]
        lines.append(line)
    return lines
