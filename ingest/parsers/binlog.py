"""Binary logs (ROW), as a format of the registry: a binary format, read, not parsed by lines.

A binlog has no lines, so this module exports `read(stream, name)` where line formats export
`parse`: the registry's `reads_bytes(fmt)` tells the two apart, and `ingest_file` hands such a
file to `ingest.binlog_store`. The reading itself is `ingest.binlog` (pure, no Django): this
module only registers it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from ingest.binlog.reader import MAGIC, BinlogProblem

if TYPE_CHECKING:
    from ingest.binlog.metadata import BinlogFile, Transaction

__all__ = ["LABEL", "NAME", "read", "recognise", "time_digits"]

NAME = "binlog"
LABEL = "Binary log (ROW events)"


def recognise(head: bytes) -> bool:
    """Every binlog file begins with the magic bytes `\\xfebin`; no text log can."""
    return head[:4] == MAGIC


def time_digits(head: bytes) -> int | None:
    """Binlog events are stamped to the second."""
    return 0


def read(stream: BinaryIO, name: str) -> Iterator[BinlogFile | Transaction | BinlogProblem]:
    """The metadata pass over one file (`ingest.binlog.metadata.scan`): a BinlogFile, then its
    transactions, with problems where they occur; row values are never decoded here."""
    # Imported here: the decoder pulls in mysql-replication, which no text format needs.
    from ingest.binlog.metadata import scan

    return scan(stream, name)
