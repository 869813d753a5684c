"""Custody links of version 3 (issue 22): one SHA-256 over a batch's narrow rows as copied and
the statements they name, a CRC-32 per row; `verify_evidence` makes the rows again from
`ingest_event_row` and the statements from `ingest_statement`, and names what differs. Links of
version 2 (the wide lines) written before still verify."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import zstandard
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from ingest.custody import append_link, row_checks
from ingest.models import CustodyHead, CustodyLink, Event, Statement
from ingest.pipeline import ingest_file, source_for_path
from ingest.rows import EVENT_COLUMNS, statement_id, statement_key, stored_copy_line
from tests.conftest import FIXTURES
from tests.ingest.test_custody import verify

pytestmark = pytest.mark.django_db

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"
SLAP = FIXTURES / "genlog" / "mariadb-10.11.19-slap.log"


def ingest(tmp_path: Path, fixture: Path = SCENARIO, name: str = "general.log", server: str = "db1") -> Path:
    path = tmp_path / name
    path.write_bytes(fixture.read_bytes())
    source = source_for_path(path, server=server, fmt="general-log", tz="UTC")
    ingest_file(path, source=source, fmt="general-log")
    return path


def sql(statement: str, params: list[object]) -> int:
    with connection.cursor() as cur:
        cur.execute(statement, params)
        return cur.rowcount


def shared_statement() -> tuple[int, list[int]]:
    """The statement named by the most events, and those events' ids."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT statement_id, array_agg(id ORDER BY id) FROM ingest_event_row"
            " GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1"
        )
        number, ids = cur.fetchone()
    return number, ids


def listed(ids: list[int]) -> str:
    """How verify_evidence lists event ids (the first ten)."""
    return f"(event ids {', '.join(map(str, ids[:10]))}" + (", ...)" if len(ids) > 10 else ")")


def test_batches_are_chained_as_version_3_and_an_untouched_store_verifies(tmp_path: Path) -> None:
    ingest(tmp_path)
    links = CustodyLink.objects.filter(kind=CustodyLink.Kind.EVENTS)
    assert [link.version for link in links] == [3]
    assert len(bytes(links[0].row_digests)) == 4 * links[0].event_count == 4 * Event.objects.count()
    status, out = verify("--all-events")
    assert status == 0, out
    assert "ALTERED" not in out and out.rstrip().endswith("Result: intact.")
    assert f"{Statement.objects.count()} statements" in out.splitlines()[1]


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("user", "mallory"),
        ("flags", ["harmless"]),
        ("raw_length", 3),
        ("raw", b"harmless"),
        ("statement_type", "SELECT"),
        ("line", 1),
    ],
)
def test_an_edited_row_is_found_and_named(tmp_path: Path, column: str, value: object) -> None:
    ingest(tmp_path)
    victim = Event.objects.filter(destructive=True).order_by("id").first()
    assert victim is not None
    assert sql(f'UPDATE ingest_event_row SET "{column}" = %s WHERE id = %s', [value, victim.pk]) == 1
    status, out = verify()
    assert status == 1
    assert "1 stored event(s) differ from how they were written" in out
    assert f"(event ids {victim.pk})" in out


def test_an_event_pointed_to_another_statement_is_found(tmp_path: Path) -> None:
    ingest(tmp_path)
    victim = Event.objects.filter(destructive=True).order_by("id").first()
    harmless = Event.objects.filter(statement_type="SELECT").first()
    assert victim is not None and harmless is not None
    sql(
        "UPDATE ingest_event_row SET statement_id = (SELECT statement_id FROM ingest_event_row WHERE id = %s)"
        " WHERE id = %s",
        [harmless.pk, victim.pk],
    )
    status, out = verify()
    assert status == 1
    assert "1 stored event(s) differ from how they were written, in the batch of link 1" in out
    assert f"(event ids {victim.pk})" in out
    assert "[statement]" not in out  # the statements themselves are as written


def test_a_statement_text_shared_by_many_events_edited_is_found_and_its_events_named(tmp_path: Path) -> None:
    ingest(tmp_path, SLAP)
    number, ids = shared_statement()
    assert len(ids) > 10
    assert sql("UPDATE ingest_statement SET sql = 'SELECT 1' WHERE id = %s", [number]) == 1
    status, out = verify()
    assert status == 1
    assert (
        f" link 1: statement {number}, named by {len(ids)} event(s) of the batch"
        f" of link 1, was changed after it was written (its values no longer make its key) {listed(ids)}"
    ) in out
    assert "differ from how they were written" not in out  # the rows are as written
    # Its key made again to fit: its id is no longer its key's.
    row = Statement.objects.get(pk=number)
    key = statement_key(
        row.database, row.statement_type, row.tables, row.destructive, row.fingerprint, row.sql
    )
    assert statement_id(key) != number
    sql("UPDATE ingest_statement SET key = %s WHERE id = %s", [key, number])
    status, out = verify()
    assert status == 1
    assert f"statement {number}, named by {len(ids)} event(s)" in out
    assert "was changed after it was written (its key is not one of its id's)" in out


def test_rows_renumbered_by_the_writer_to_a_statements_next_id_verify(tmp_path: Path) -> None:
    ingest(tmp_path, SLAP, name="a.log", server="a")
    number, ids = shared_statement()
    key = bytes(Statement.objects.get(pk=number).key)
    # Another statement holds that id now (a 64-bit id shared by two keys, made to happen): to
    # the first source's chain, its statement was altered.
    Statement.objects.filter(pk=number).update(key=b"\x00" * 16)
    ingest(tmp_path, SLAP, name="b.log", server="b")
    renumbered = Event.objects.filter(server="b", statement_id=statement_id(key, 1))
    assert renumbered.count() == len(ids)
    status, out = verify()
    assert status == 1
    (finding,) = [line for line in out.splitlines() if line.startswith("ALTERED")]
    assert f"a.log' link 1: statement {number}, named by {len(ids)} event(s)" in finding
    assert "its values no longer make its key" in finding


def test_a_statement_deleted_from_the_dictionary_is_found(tmp_path: Path) -> None:
    ingest(tmp_path, SLAP)
    number, ids = shared_statement()
    sql("DELETE FROM ingest_statement WHERE id = %s", [number])
    status, out = verify()
    assert status == 1
    assert f"statement {number}, named by {len(ids)} event(s) of the batch of link 1, is missing" in out
    assert listed(ids) in out


def test_an_inserted_row_and_a_deleted_row_are_found_and_named(tmp_path: Path) -> None:
    ingest(tmp_path)
    ids = list(Event.objects.order_by("id").values_list("id", flat=True))
    sql("DELETE FROM ingest_event_row WHERE id = %s", [ids[10]])
    sql(  # a forged row under the id of another deleted one, inside the batch's ranges
        "UPDATE ingest_event_row SET id = %s, record_hash = '\\x02' WHERE id = %s", [ids[30], ids[31]]
    )
    sql("DELETE FROM ingest_event_row WHERE id = %s AND record_hash <> '\\x02'", [ids[30]])
    status, out = verify()
    assert status == 1
    assert "missing from the batch of link 1" in out
    assert f"event number 11 of 75, between event ids {ids[9]} and {ids[11]}" in out
    assert f"(event ids {ids[30]})" in out


def test_a_row_inserted_outside_every_batch_is_found(tmp_path: Path) -> None:
    ingest(tmp_path)
    columns = "occurred_at, server, command, statement_type, tables, destructive, flags, statement_id, line"
    columns += ", byte_offset, record_hash, session_id, source_file_id, raw_length"
    sql(
        f"INSERT INTO ingest_event_row ({columns}) SELECT occurred_at, server, command, statement_type,"
        " tables, destructive, flags, statement_id, line, byte_offset + 1, '\\x01', session_id,"
        " source_file_id, raw_length FROM ingest_event_row ORDER BY id LIMIT 1",
        [],
    )
    forged = Event.objects.order_by("-id").first()
    assert forged is not None
    status, out = verify()
    assert status == 1
    assert "1 stored event(s) of this source are in no batch of its chain" in out
    assert f"(event ids {forged.pk})" in out


def test_a_byte_changed_in_a_kept_chunk_is_found_with_its_events(tmp_path: Path) -> None:
    ingest(tmp_path)
    victim = Event.objects.filter(destructive=True).order_by("id").first()
    assert victim is not None and victim.raw_inline is None  # its bytes are in a chunk
    with connection.cursor() as cur:
        cur.execute(
            "SELECT start, data FROM ingest_rawchunk WHERE source_file_id = %s AND start <= %s"
            " ORDER BY start DESC LIMIT 1",
            [victim.source_file_id, victim.byte_offset],
        )
        start, data = cur.fetchone()
    content = bytearray(zstandard.ZstdDecompressor().decompress(bytes(data)))
    content[victim.byte_offset - start + 2] ^= 0x20
    sql(
        "UPDATE ingest_rawchunk SET data = %s WHERE source_file_id = %s AND start = %s",
        [zstandard.ZstdCompressor().compress(bytes(content)), victim.source_file_id, start],
    )
    status, out = verify()
    assert status == 1
    assert "no longer holds the bytes that were read (its SHA-256 differs)" in out
    # The events whose bytes the chunk holds are named (here the whole file is one chunk).
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("verify_evidence", "--json", stdout=out)
    (chunk,) = [f for f in json.loads(out.getvalue())["findings"] if f["what"] == "chunk"]
    assert chunk["event_ids"] == list(Event.objects.order_by("id").values_list("id", flat=True))[:50]


def rechain_as_version_2() -> None:
    """The chain as the writer of before this change made it: each events link of version 2,
    the SHA-256 and CRC-32s of the wide lines (ingest.rows.stored_copy_line, the inverse of the
    formatter of then) of the rows as they are now; the other links as they are."""
    links = list(CustodyLink.objects.order_by("source_id", "seq"))
    CustodyLink.objects.all().delete()
    CustodyHead.objects.all().delete()
    names = ", ".join(f'"{c}"' for c in ("id", *EVENT_COLUMNS))
    with transaction.atomic():
        for link in links:
            fields: dict[str, Any] = {
                n: getattr(link, n)
                for n in (
                    "source_file_id",
                    "ingest_run_id",
                    "id_after",
                    "id_last",
                    "offset_min",
                    "offset_max",
                )
            }
            if link.kind != CustodyLink.Kind.EVENTS:
                fields |= {"file_bytes": link.file_bytes, "file_sha256": link.file_sha256}
                fields |= {"file_scope": link.file_scope, "flag": link.flag, "keys": link.keys}
                append_link(source_id=link.source_id, kind=link.kind, **fields)
                continue
            with connection.cursor() as cur:
                cur.execute(
                    f"SELECT {names} FROM ingest_event WHERE source_file_id = %s AND id > %s AND id <= %s"
                    " ORDER BY id",
                    [link.source_file_id, link.id_after, link.id_last],
                )
                columns = [c.name for c in cur.description]
                rows = [dict(zip(columns, r, strict=True)) for r in cur.fetchall()]
            lines = [stored_copy_line(r, list(r["flags"])).encode() for r in rows]
            append_link(
                source_id=link.source_id,
                kind="events",
                event_count=len(lines),
                row_digests=row_checks(lines),
                version=2,
                rows_sha256=hashlib.sha256(b"".join(lines)).digest(),
                chunks=link.chunks,
                **fields,
            )


def test_links_of_version_2_still_verify_and_their_edits_are_found(tmp_path: Path) -> None:
    ingest(tmp_path)
    rechain_as_version_2()
    assert list(CustodyLink.objects.filter(kind="events").values_list("version", flat=True)) == [2]
    status, out = verify("--all-events")
    assert status == 0, out
    victim = Event.objects.filter(destructive=True).order_by("id").first()
    assert victim is not None
    sql("UPDATE ingest_event SET sql = 'SELECT 1' WHERE id = %s", [victim.pk])
    status, out = verify()
    assert status == 1
    assert "1 stored event(s) differ from how they were written" in out
    assert f"(event ids {victim.pk})" in out
