"""The JSON report: the case, its evidence with record hashes and positions, the analyst's
notes, the gaps over its window, and the chain-of-custody manifest (source files and ingest
runs). Written piece by piece, so a large case is never one object in memory.

Times are ISO 8601 in UTC; hashes are lower-case hex; `raw_base64` holds each event's exact log
bytes (which may be any bytes), `sql` their searchable text; for a record that held a password or
key (`raw_withheld`), `raw_base64` is null and `raw_masked_base64` holds its bytes cut before the
secret."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import IO, Any

import orjson

from investigations.raw import raw_withheld, shown_raw
from investigations.reports import content

FORMAT_VERSION = 1


def _dump(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC)


def manifest_head(summary: content.Summary) -> dict[str, Any]:
    case, report = summary.case, summary.report
    start, end = summary.window
    return {
        "format": "auditweb-case-report",
        "format_version": FORMAT_VERSION,
        "report": {
            "id": report.pk,
            "generator": "AuditWeb",
            "generated_by": report.generated_by.get_username(),
            "generated_at": report.requested_at,
            "sha256_note": (
                "A report cannot hold its own hash: AuditWeb stores it (GET /api/v1/reports/<id>/)."
            ),
        },
        "case": {
            "id": case.pk,
            "title": case.title,
            "description": case.description,
            "status": case.status,
            "investigators": summary.investigators,
            "created_by": case.created_by.get_username(),
            "created_at": case.created_at,
            "closed_at": case.closed_at,
            "window_start": start,
            "window_end": end,
            "evidence_count": summary.evidence_count,
            "destructive_count": summary.destructive_count,
            "servers": summary.servers,
        },
    }


def evidence_entry(item: content.Item) -> dict[str, Any]:
    pin, e = item.pin, item.event
    entry: dict[str, Any] = {
        "number": item.number,
        "event_id": pin.event_id,
        "integrity": item.integrity,
        "pinned": {
            "occurred_at": pin.event_occurred_at,
            "record_hash": bytes(pin.event_record_hash).hex(),
            "by": pin.pinned_by.get_username(),
            "at": pin.pinned_at,
            "note": pin.note,
        },
    }
    if e is None:
        return entry
    entry.update(
        occurred_at=e.occurred_at,
        server=e.server,
        session=e.session.key,
        connection_id=e.connection_id,
        user=e.user,
        host=e.host,
        ip=e.ip,
        attribution=e.attribution or None,
        definer=e.definer,
        database=e.database,
        command=e.command,
        statement_type=e.statement_type,
        tables=e.tables,
        destructive=e.destructive,
        flags=e.flags,
        rows_affected=e.rows_affected,
        status=e.status,
        sql=e.sql,
        record_hash=bytes(e.record_hash).hex(),
        # A record that holds a password or key: its bytes are withheld, cut before the secret.
        raw_base64=None if raw_withheld(e) else base64.b64encode(bytes(e.raw)).decode(),
        raw_withheld=raw_withheld(e),
        raw_masked_base64=base64.b64encode(shown_raw(e)).decode() if raw_withheld(e) else None,
        ingest_run=e.ingest_run_id,
        source={
            "file_id": e.source_file_id,
            "file": e.source_file.path,
            "line": e.line,
            "offset": e.byte_offset,
            "file_sha256": e.source_file.sha256,
            "file_size": e.source_file.size,
        },
    )
    if item.rows is not None:
        r = item.rows
        entry["binlog"] = {
            "rows_changed": r.rows_changed,
            "confidence": r.confidence,
            "evidence": r.evidence,
            "statements": r.statements,
            "rows_total": r.total,
            "rows": r.rows,
            "rows_not_listed": r.more,
            "rows_note": r.more_note(e.id) or None,
            "error": r.error,
        }
    return entry


def note_entries(case: Any) -> list[dict[str, Any]]:
    return [
        {"author": n.author.get_username(), "at": n.created_at, "text": n.text} for n in content.notes(case)
    ]


def gap_entries(listed: content.Listed) -> dict[str, Any]:
    rows = [
        {
            "server": g.server,
            "reason": g.reason,
            "reason_text": g.get_reason_display(),
            "started_at": g.started_at,
            "ended_at": g.ended_at,
            "detail": g.detail,
            "file": g.source_file.path,
            "line": g.line,
            "offset": g.byte_offset,
        }
        for g in listed.rows
    ]
    return {"listed": rows, "not_listed": listed.more}


def file_entries(listed: content.Listed) -> dict[str, Any]:
    rows = [
        {
            "id": f.id,
            "path": f.path,
            "source": f.source.name,
            "server": f.source.server,
            "size": f.size,
            "sha256": f.sha256,
            "complete": f.finished,
            "head_sha256": f.head_sha256,
            "bytes_read": f.bytes_read,
            "first_seen_at": f.first_seen_at,
            "last_read_at": f.last_read_at,
        }
        for f in listed.rows
    ]
    return {"listed": rows, "not_listed": listed.more}


def run_entries(listed: content.Listed) -> dict[str, Any]:
    rows = [
        {
            "id": r.id,
            "source": r.source.name,
            "file": r.source_file.path if r.source_file else None,
            "status": r.status,
            "started_at": r.started_at,
            "finished_at": r.finished_at,
            "bytes_read": r.bytes_read,
            "events_stored": r.events_stored,
            "problems": r.problems,
        }
        for r in listed.rows
    ]
    return {"listed": rows, "not_listed": listed.more}


def write_json(case: Any, report: Any, out: IO[bytes], progress: Callable[[int], None]) -> None:
    """One JSON object; the evidence array is written an entry at a time."""
    head = manifest_head(content.summary(case, report))
    out.write(_dump(head)[:-1])  # the object stays open for the rest
    out.write(b',"evidence":[')
    for item in content.evidence_items(case):
        if item.number > 1:
            out.write(b",")
        out.write(_dump(evidence_entry(item)))
        progress(item.number)
    out.write(b'],"notes":' + _dump(note_entries(case)))
    filters = [{"name": f.name, "query": f.query, "at": f.created_at} for f in content.saved_filters(case)]
    out.write(b',"saved_filters":' + _dump(filters))
    out.write(b',"gaps":' + _dump(gap_entries(content.gaps(case))))
    custody = {
        "source_files": file_entries(content.source_files(case)),
        "ingest_runs": run_entries(content.ingest_runs(case)),
    }
    out.write(b',"chain_of_custody":' + _dump(custody) + b"}")
