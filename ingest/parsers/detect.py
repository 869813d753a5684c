"""Which log format is this? Decided from the first KiB of a file, by the registry's recognisers."""

from __future__ import annotations

from ingest.parsers import FORMATS, NAMES

HEAD_BYTES = 1024


class UnknownFormat(ValueError):
    """No recogniser matched. The message names what was tried and shows the first line."""


def detect_format(head: bytes) -> str:
    """The NAME of the first format in FORMATS (ingest/parsers/__init__.py) that claims `head`."""
    head = head[:HEAD_BYTES]
    for fmt in FORMATS:
        if fmt.recognise(head):
            return fmt.NAME
    first_line = head.split(b"\n", 1)[0][:200].decode("utf-8", "replace")
    raise UnknownFormat(
        f"Cannot tell the format of this log from its first {HEAD_BYTES} bytes"
        f" (tried: {', '.join(NAMES)}). Its first line is: {first_line!r}."
        " Name the format with --format."
    )
