"""How precisely a log wrote an event's time: to the second, the millisecond or the microsecond.

The store keeps every time in microseconds, so `08:48:22` from a general log file and
`08:48:22.000000` from the mysql.general_log table look alike there. The record's own bytes
say which it was: the digits its timestamp printed after the seconds. Pure Python (no Django):
the event page calls `time_digits` with the event's raw bytes and its source's format.
"""

from __future__ import annotations

import re

from ingest.parsers.detect import UnknownFormat, detect_format

HEAD = 512  # the timestamp is near a record's start; never read further into hostile bytes
# A date and time with an optional fraction; the fraction's digits are the log's precision.
_ISO = re.compile(rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.(\d{1,9}))?")
# A time of day (server_audit's `20260105 08:48:22`, syslog's `Jan  5 08:48:22`, audit values).
_CLOCK = re.compile(rb"\d{1,2}:\d\d:\d\d(?:\.(\d{1,9}))?")
_JSON_MILLIS = re.compile(rb'"date"\s*:\s*"?(\d{10,16})\b')  # McAfee/Trellix: epoch milliseconds
_JSON_STAMP = re.compile(rb'"timestamp"\s*:\s*"([^"]{1,64})"')  # Percona, MySQL Enterprise
_XML_STAMP = re.compile(rb'TIMESTAMP\s*(?:=\s*"|>)([^"<]{1,64})')  # attribute or element
EPOCH_DIGITS = {10: 0, 13: 3, 16: 6}  # seconds, milliseconds, microseconds since 1970
TABLE_DIGITS = 6  # mysql.general_log.event_time is TIMESTAMP(6)


def _fraction(match: re.Match[bytes] | None) -> int | None:
    if match is None:
        return None
    return min(len(match.group(1) or b""), 6)


def time_digits(raw: bytes, fmt: str, kind: str = "file") -> int | None:
    """Digits after the seconds that the record's timestamp has (0: whole seconds), from the
    source's format (`auto`: recognised from the record itself) and the record's bytes. None
    when the record does not show a time AuditWeb can read (then nothing is claimed)."""
    if kind == "mysql-table":
        return TABLE_DIGITS  # live rows: the table's column, not printed text
    head = bytes(raw[:HEAD])
    if fmt in ("", "auto"):
        try:
            fmt = detect_format(head)
        except UnknownFormat:
            return None
    if fmt == "general-log":
        # 5.7+/8.x print an ISO time on every line (with the fraction the server chose); 5.0-5.6
        # and MariaDB print `260105  8:48:22`, or no time at all on a line in the same second.
        found = _ISO.match(head)
        return _fraction(found) if found else 0
    if fmt == "general-log-csv":
        return _fraction(_ISO.match(head, 1))
    if fmt == "general-log-tsv":
        return _fraction(_ISO.match(head))
    if fmt == "mariadb-audit":
        return _fraction(_CLOCK.search(head, 0, 80))
    if fmt == "json-audit":
        millis = _JSON_MILLIS.search(head)
        if millis:
            return EPOCH_DIGITS.get(len(millis.group(1)))
        stamp = _JSON_STAMP.search(head)
        return _fraction(_CLOCK.search(stamp.group(1))) if stamp else None
    if fmt == "xml-audit":
        stamp = _XML_STAMP.search(head)
        return _fraction(_CLOCK.search(stamp.group(1))) if stamp else None
    if fmt == "audit-csv":
        return _fraction(_CLOCK.search(head, 0, 200))
    return None
