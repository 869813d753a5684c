"""The CSV report: one row per evidence event, every text cell neutralised against formulas."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from datetime import datetime
from typing import IO

from investigations.models import Case, Report
from investigations.reports import content
from investigations.reports.text import csv_cell

COLUMNS = [
    "number", "event_id", "occurred_at_utc", "server", "user", "host", "ip", "session", "connection_id",
    "database", "command", "statement_type", "tables", "destructive", "flags", "rows_affected", "status",
    "sql", "source_file", "source_line", "source_offset", "source_file_sha256", "record_hash",
    "integrity", "pinned_record_hash", "note", "pinned_by", "pinned_at_utc", "attribution", "definer",
    "rows_changed", "binlog_confidence", "binlog_evidence", "binlog_rows", "binlog_rows_more",
]  # fmt: skip


def _iso(when: datetime | None) -> str:
    return when.isoformat() if when is not None else ""


def row(item: content.Item) -> list[object]:
    pin, e = item.pin, item.event
    pinned = [item.integrity, bytes(pin.event_record_hash).hex(), pin.note, pin.pinned_by.get_username(),
              _iso(pin.pinned_at)]  # fmt: skip
    if e is None:
        return [item.number, pin.event_id, _iso(pin.event_occurred_at), *[""] * 22, *pinned, "", "",
                *[""] * 5]  # fmt: skip
    return [
        item.number, e.id, _iso(e.occurred_at), e.server, e.user or "", e.host or "", e.ip or "",
        e.session.key, e.connection_id if e.connection_id is not None else "", e.database or "",
        e.command, e.statement_type, " ".join(e.tables), "yes" if e.destructive else "no", " ".join(e.flags),
        e.rows_affected if e.rows_affected is not None else "", e.status or "", e.sql,
        e.source_file.path, e.line, e.byte_offset, e.source_file.sha256, bytes(e.record_hash).hex(), *pinned,
        e.attribution or "not recorded", e.definer or "", *binlog_cells(item),
    ]  # fmt: skip


def binlog_cells(item: content.Item) -> list[object]:
    """rows_changed, the join's confidence and evidence, the first rows (JSON: table, change,
    before and after by column) and how many more the API has."""
    r = item.rows
    if r is None:
        return ["", "", "", "", ""]
    rows = json.dumps(r.rows, ensure_ascii=False, sort_keys=False)
    more = r.more_note(item.pin.event_id) or (f"unreadable: {r.error}" if r.error else "")
    changed = r.rows_changed if r.rows_changed is not None else ""
    return [changed, r.confidence or "", "; ".join(r.evidence), rows, more]


def write_csv(case: Case, report: Report, out: IO[bytes], progress: Callable[[int], None]) -> None:
    """UTF-8 with a BOM (spreadsheets then read it as UTF-8), CRLF rows as RFC 4180 has them."""
    text = io.TextIOWrapper(out, encoding="utf-8-sig", newline="", write_through=True)
    writer = csv.writer(text)
    writer.writerow(COLUMNS)
    for item in content.evidence_items(case):
        writer.writerow([csv_cell(v) for v in row(item)])
        progress(item.number)
    text.flush()
    text.detach()
