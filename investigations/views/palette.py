"""The one palette of statement types: the timeline's bars and every badge take their colour here.

Pure Python (no Django): `chart_data` puts each series' colour into the chart's JSON, and
`palette_css` writes the badges' CSS classes into static/css/palette.css (`python -m
investigations.views.palette` rewrites it; a test fails while the file and the dict differ), so a
DELETE is the same red in the chart, the explorer, the dashboard, a session and a case.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Destructive kinds in reds, oranges and browns; privileges in purples; reading and writing new
# rows in blues and greens; transaction control and commands in greys.
STATEMENT_COLOURS: dict[str, str] = {
    "DELETE": "#c0392b",
    "TRUNCATE": "#8e1b10",
    "DROP TABLE": "#7b241c",
    "DROP DATABASE": "#4a0f0a",
    "DROP VIEW": "#a04000",
    "UPDATE": "#e67e22",
    "REPLACE": "#d35400",
    "ALTER TABLE": "#9c640c",
    "RENAME TABLE": "#9a7d0a",
    "LOAD DATA": "#af601a",
    "GRANT": "#6c3483",
    "REVOKE": "#884ea0",
    "CREATE USER": "#5b2c6f",
    "DROP USER": "#512e5f",
    "ALTER USER": "#76448a",
    "SET PASSWORD": "#4a235a",
    "SELECT": "#2e86c1",
    "INSERT": "#17a589",
    "CREATE TABLE": "#148f77",
    "SET": "#5d6d7e",
    "CALL": "#1f618d",
    "BEGIN": "#5b7db1",  # as a session's transaction brackets
    "COMMIT": "#34568b",
    "ROLLBACK": "#b9770e",
    "CREATE DATABASE": "#0e6655",
    "CREATE PROCEDURE": "#117a65",
    "PREPARE": "#7fb3d5",
    "EXECUTE": "#cb4335",
    "DEALLOCATE PREPARE": "#aeb6bf",
    "USE": "#85c1e9",
    "SHOW": "#a9cce3",
    "TABLE READ": "#aed6f1",  # server_audit's table operations
    "TABLE WRITE": "#f0b27a",
    "PURGE BINARY LOGS": "#641e16",
    "RESET MASTER": "#78281f",
    "SHUTDOWN": "#17202a",
    "UNINSTALL SONAME": "#943126",
    "Connect": "#48c9b0",
    "Quit": "#99a3a4",
    "Init DB": "#76b7e5",
    "Change user": "#d4ac0d",
}
# Every other type, and the chart's "other" series: one colour per side.
OTHER = "#aab4be"
OTHER_DESTRUCTIVE = "#b42318"
OTHER_LABELS = {"other": OTHER, "other destructive": OTHER_DESTRUCTIVE}
DARK_LUMINANCE = 0.0165  # of #1d232a, the page's text colour
LIGHTER = "80"  # alpha appended to the colour of a type's non-destructive bars when both sides have it


def colour_of(label: str, destructive: bool) -> str:
    """The colour of a statement type (or command, or "other" series)."""
    if label in STATEMENT_COLOURS:
        return STATEMENT_COLOURS[label]
    if label in OTHER_LABELS:
        return OTHER_LABELS[label]
    return OTHER_DESTRUCTIVE if destructive else OTHER


def css_name(label: str) -> str:
    """The class of a palette type's badge: `st-drop-table`."""
    return "st-" + re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def badge_class(label: str, destructive: bool) -> str:
    """The classes of a statement type's badge (`badge` and its colour's class)."""
    if label in STATEMENT_COLOURS:
        return f"badge {css_name(label)}"
    return "badge st-other-destructive" if destructive else "badge st-other"


def _text_on(colour: str) -> str:
    """White or near-black text, whichever reads better on `colour` (WCAG relative luminance)."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    on_white, on_dark = 1.05 / (luminance + 0.05), (luminance + 0.05) / (DARK_LUMINANCE + 0.05)
    return "#ffffff" if on_white >= on_dark else "#1d232a"


def palette_css() -> str:
    """The badges' CSS: one rule per type of the palette, and the two "other" colours."""
    rules = [("st-other", OTHER), ("st-other-destructive", OTHER_DESTRUCTIVE)]
    rules += [(css_name(label), colour) for label, colour in STATEMENT_COLOURS.items()]
    lines = ["/* Made by investigations/views/palette.py: the one palette of statement types. */"]
    for name, colour in rules:
        lines.append(f".badge.{name} {{ background: {colour}; color: {_text_on(colour)}; }}")
    return "\n".join(lines) + "\n"


def series_colours(series: list[tuple[str, bool]]) -> list[str]:
    """Colours for the timeline's series ((label, destructive) each): a type drawn on both sides
    has its non-destructive bars lighter, so the two stay apart."""
    both = {label for label, d in series if d} & {label for label, d in series if not d}
    return [colour_of(label, d) + (LIGHTER if label in both and not d else "") for label, d in series]


CSS_FILE = Path(__file__).resolve().parents[2] / "static" / "css" / "palette.css"

if __name__ == "__main__":
    CSS_FILE.write_text(palette_css())
    sys.stdout.write(f"wrote {CSS_FILE}\n")
