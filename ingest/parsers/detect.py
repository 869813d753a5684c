"""Which log format is this? Decided from the first KiB of a file."""

from __future__ import annotations

import re
from collections.abc import Callable

from ingest.parsers import audit_csv, general_log_table, json_audit, server_audit, xml_audit

HEAD_BYTES = 1024

# Recognisers, tried in order. Each looks for a layout only its format writes.
_GENERAL_LOG = re.compile(
    rb"""
    (?:^|\n)
    (?:
        [^\n]*,\x20Version:\x20[^\n]*started\x20with:    # server start banner
      | Time\s+Id\s+Command\s+Argument                   # its column header line
      | \d{6}\s+\d{1,2}:\d{2}:\d{2}\s+\d+\s+[A-Z][a-z]   # 5.0-5.6 / MariaDB: 100211  0:55:24   7 Query
      | \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})\s+\d+\s+[A-Z][a-z]  # 5.7+
      | \t\t\s*\d+\s+(?:Connect|Query|Quit|Init\x20DB|Execute|Prepare)\b  # tab-indented, no time
    )
    """,
    re.VERBOSE,
)


def _general_log(head: bytes) -> bool:
    return _GENERAL_LOG.search(head) is not None


# Each format's own test of the first KiB, tried in this order: the layouts with the most
# distinctive shape first, so that a looser test never claims a file another one knows.
RECOGNISERS: dict[str, Callable[[bytes], bool]] = {
    json_audit.FORMAT: json_audit.recognise,
    xml_audit.FORMAT: xml_audit.recognise,
    audit_csv.FORMAT: audit_csv.recognise,
    general_log_table.FORMAT_CSV: general_log_table.recognise_csv,
    general_log_table.FORMAT_TSV: general_log_table.recognise_tsv,
    server_audit.FORMAT: server_audit.recognise,
    "general-log": _general_log,
}


class UnknownFormat(ValueError):
    """No recogniser matched. The message names what was tried and shows the first line."""


def detect_format(head: bytes) -> str:
    head = head[:HEAD_BYTES]
    for name, recognise in RECOGNISERS.items():
        if recognise(head):
            return name
    first_line = head.split(b"\n", 1)[0][:200].decode("utf-8", "replace")
    raise UnknownFormat(
        f"Cannot tell the format of this log from its first {HEAD_BYTES} bytes"
        f" (tried: {', '.join(RECOGNISERS)}). Its first line is: {first_line!r}."
        " Name the format with --format."
    )
