"""How precisely a log wrote an event's time: to the second, the millisecond or the microsecond.

The store keeps every time in microseconds, so `08:48:22` from a general log file and
`08:48:22.000000` from the mysql.general_log table look alike there. The record's own bytes
say which it was: the digits its timestamp printed after the seconds, which each format's
module reads (`time_digits` in ingest/parsers/). Pure Python (no Django): the event page
calls `time_digits` with the event's raw bytes and its source's format.
"""

from __future__ import annotations

from ingest.parsers import AUTO, NAMES, by_name
from ingest.parsers.detect import UnknownFormat, detect_format

HEAD = 512  # the timestamp is near a record's start; never read further into hostile bytes
TABLE_DIGITS = 6  # mysql.general_log.event_time is TIMESTAMP(6)


def time_digits(raw: bytes, fmt: str, kind: str = "file") -> int | None:
    """Digits after the seconds that the record's timestamp has (0: whole seconds), from the
    source's format (`auto`: recognised from the record itself) and the record's bytes. None
    when the record does not show a time AuditWeb can read (then nothing is claimed)."""
    if kind in ("mysql-table", "oracle-table"):
        return TABLE_DIGITS  # live rows: the table's column (both TIMESTAMP(6)), not printed text
    head = bytes(raw[:HEAD])
    if fmt in ("", AUTO):
        try:
            fmt = detect_format(head)
        except UnknownFormat:
            return None
    if fmt not in NAMES:
        return None
    return by_name(fmt).time_digits(head)
