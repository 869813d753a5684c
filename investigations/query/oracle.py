"""What an Oracle event's record says beyond the event's columns, for its page: SCN, transaction,
the accounts around it, the binds (masked like any secret where they may hold one), policies.

The store keeps each event's raw bytes, not the parser's `extra`: the record is read again here
(a pulled row and a SQLcl JSON row are a JSON object, an XML file's record is an <AuditRecord>;
a SQLcl CSV row needs its file's header line, read from the file while it is still there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ingest.models import Event, Source
from ingest.oracle import masked_binds
from ingest.parsers import AUTO, dialect_of
from ingest.parsers.oracle_audit import row_record
from ingest.parsers.oracle_csv import csv_fields, recognise
from ingest.parsers.oracle_json import loads
from ingest.parsers.oracle_xml import xml_record
from ingest.parsers.records import LogRecord

HEADER_BYTES = 64 * 1024  # a CSV export's header line is read up to this


@dataclass(frozen=True)
class OracleFacts:
    scn: str | None
    transaction_id: str | None
    current_user: str | None
    proxy_user: str | None
    action: str | None
    binds: str | None
    policies: str | None
    dbid: str | None
    instance_id: str | None
    entry_id: str | None
    statement_id: str | None
    return_code: str | None
    header_missing: bool = False  # a CSV row whose file (and so its header) is gone


def is_oracle(source: Source) -> bool:
    if source.kind == Source.Kind.ORACLE_TABLE:
        return True
    return source.format not in ("", AUTO) and dialect_of(source.format) == "oracle"


def _csv_header(path: str) -> list[str] | None:
    try:
        with Path(path).open("rb") as f:
            head = f.read(HEADER_BYTES)
    except OSError:
        return None
    if not recognise(head):
        return None
    fields = csv_fields(head.split(b"\n", 1)[0].lstrip(b"\xef\xbb\xbf"))
    return [c.upper() for c in fields] if isinstance(fields, list) else None


def oracle_facts(event: Event) -> OracleFacts | None:
    """The facts of an Oracle event's record, or None for an event of another server."""
    source = event.source_file.source
    raw = bytes(event.raw)
    shape = raw.lstrip()[:13]
    header = None
    if not is_oracle(source):
        if source.format != AUTO:
            return None
        # Recognised when read: a JSON row or an XML record of Oracle's, or a row of a file whose
        # head is a SQLcl CSV export's.
        if shape.startswith(b"{"):
            if b'"event_timestamp_utc"' not in raw.lower() or b'"action_name"' not in raw.lower():
                return None
        elif not shape.startswith(b"<AuditRecord>"):
            header = _csv_header(event.source_file.path)
            if header is None:
                return None
    record = None
    missing = False
    if shape.startswith(b"{"):
        try:
            values = loads(raw)
        except (ValueError, RecursionError):
            values = None
        if isinstance(values, dict):
            record = row_record(values, line=event.line, offset=event.byte_offset, raw=raw)
    elif shape.startswith(b"<AuditRecord>"):
        record = xml_record(raw, event.byte_offset, event.line)
    else:
        header = header or _csv_header(event.source_file.path)
        fields = csv_fields(raw)
        if header is None:
            missing = True
        elif isinstance(fields, list) and len(fields) == len(header):
            record = row_record(dict(zip(header, fields, strict=True)), line=event.line, offset=0, raw=raw)
    if not isinstance(record, LogRecord):
        if not is_oracle(source):
            return None
        return OracleFacts(*([None] * 12), header_missing=missing)
    x = record.extra
    return OracleFacts(
        scn=x.get("scn"),
        transaction_id=x.get("transaction_id"),
        current_user=x.get("current_user"),
        proxy_user=x.get("dbproxy_username"),
        action=x.get("action_name"),
        binds=masked_binds(record.argument.decode("utf-8", "surrogateescape"), x.get("sql_binds")),
        policies=x.get("unified_audit_policies"),
        dbid=x.get("dbid"),
        instance_id=x.get("instance_id"),
        entry_id=x.get("entry_id"),
        statement_id=x.get("statement_id"),
        return_code=_ora(x.get("return_code")),
    )


def _ora(code: str | None) -> str | None:
    """ORA-nnnnn of a non-zero RETURN_CODE (None for 0 or none)."""
    if not code or not code.isdigit() or int(code) == 0:
        return None
    return f"ORA-{int(code):05d}"
