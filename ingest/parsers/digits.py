"""How precisely a record printed its time: the digits after the seconds, read from its bytes.

The store keeps every time in microseconds, so `08:48:22` and `08:48:22.000000` look alike
there; each format's `time_digits(head)` reads its own timestamp with these helpers.
"""

from __future__ import annotations

import re

# A date and time with an optional fraction; the fraction's digits are the log's precision.
ISO = re.compile(rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.(\d{1,9}))?")
# A time of day (server_audit's `20260105 08:48:22`, syslog's `Jan  5 08:48:22`, audit values).
CLOCK = re.compile(rb"\d{1,2}:\d\d:\d\d(?:\.(\d{1,9}))?")
EPOCH_DIGITS = {10: 0, 13: 3, 16: 6}  # seconds, milliseconds, microseconds since 1970, by length


def fraction(match: re.Match[bytes] | None) -> int | None:
    """Digits of the matched fraction (0: whole seconds), at most 6; None when nothing matched."""
    if match is None:
        return None
    return min(len(match.group(1) or b""), 6)


def clock_in(value: bytes | None) -> int | None:
    """Digits of the first time of day in `value` (an audit record's timestamp field)."""
    return fraction(CLOCK.search(value)) if value is not None else None
