"""Followed sources given hostile files: a NUL byte in session data (a general-log Connect user, a
McAfee or MySQL Enterprise `program_name`) must not stop the source. Each poll goes on and the
statements after the hostile record are stored; the record itself is stored with its exact raw
bytes (the NUL kept there) and shown as a problem of its run. Built from real records: the crime
scene's general log (MariaDB 10.11 here), the McAfee plugin's sample from the Wazuh ruleset and
MySQL Enterprise Audit's from filebeat's test log (tests/fixtures, ../shared/corpus)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.follow import ingest_source
from ingest.models import Event, IngestRun, ParseProblem, Session, Source

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# The crime scene's general log, as the real MariaDB wrote it: its first 32 lines end after the
# Quit of connections 405 and 406 (a complete piece, cut at a record's end).
SCENE = (FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log").read_bytes()
SCENE_HEAD = b"".join(SCENE.splitlines(keepends=True)[:32])

# One record of the McAfee/Trellix audit plugin (5.6.38), as the Wazuh ruleset's sample has it.
MCAFEE = (
    b'{"msg-type":"activity","date":"1516567908029","thread-id":"26","query-id":"424","user":"root",'
    b'"priv_user":"root","ip":"","host":"localhost","connect_attrs":{"_os":"Linux","_client_name":'
    b'"libmysql","_pid":"23090","_client_version":"5.6.38","_platform":"x86_64","program_name":"mysql"},'
    b'"pid":"23090","os_user":"root","appname":"mysql","rows":"1","status":"0","cmd":"select",'
    b'"query":"select @@version_comment limit 1"}\n'
)
# MySQL Enterprise Audit (8.0.22), one object a line, as filebeat's test log has it.
ENTERPRISE_CONNECT = (
    b'{ "timestamp": "2020-10-19 19:25:51", "id": 0, "class": "connection", "event": "connect", '
    b'"connection_id": 13, "account": { "user": "root", "host": "localhost" }, "login": { "user": "root", '
    b'"os": "", "ip": "", "proxy": "" }, "connection_data": { "connection_type": "socket", "status": 0, '
    b'"db": "", "connection_attributes": { "_pid": "33038", "_platform": "x86_64", "_os": "Linux", '
    b'"_client_name": "libmysql", "os_user": "root", "_client_version": "8.0.22", '
    b'"program_name": "mysql" } } },\n'
)
ENTERPRISE_QUERY = (
    b'{ "timestamp": "2020-10-19 19:25:5%d", "id": %d, "class": "general", "event": "status", '
    b'"connection_id": 13, "account": { "user": "root", "host": "localhost" }, "login": { "user": "root", '
    b'"os": "", "ip": "", "proxy": "" }, "general_data": { "command": "Query", "sql_command": "delete", '
    b'"query": "%s", "status": 0 } },\n'
)


def follow(path: Path, fmt: str) -> Source:
    return Source.objects.create(name=f"followed {path}", kind=Source.Kind.FILE, path=str(path), server="db1",
                                 format=fmt)  # fmt: skip


def poll(source: Source) -> IngestRun:
    run = ingest_source(source.pk)
    assert run is not None
    assert run.status == IngestRun.Status.DONE, run.error
    return run


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def assert_nul_problem(source: Source, raw: bytes) -> None:
    """The hostile record is shown as a problem of its run, at its own offset, with its bytes."""
    # (Raw bytes are inline or in chunks of the file's content since issue 22: compared as read.)
    (event,) = [e for e in Event.objects.filter(server="db1") if e.raw == raw]
    problem = ParseProblem.objects.get(run__source=source, offset=event.byte_offset)
    assert "NUL" in problem.reason or "surrogate" in problem.reason
    assert bytes(problem.excerpt) == raw[: len(problem.excerpt)]


def test_a_nul_in_a_connect_user_does_not_stop_a_followed_general_log(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    log.write_bytes(SCENE_HEAD)
    source = follow(log, "general-log")
    poll(source)
    # The culprit logs in with a NUL in the name, and stays connected across polls.
    connect = b"261123 12:49:00\t   499 Connect\tmall\x00ory@127.0.0.1 on shop using TCP/IP\n"
    append(log, connect + b"\t\t   499 Query\tSET NAMES utf8mb4\n\t\t   499 Query\tSELECT 1\n")
    poll(source)  # the Connect's session is open in the checkpoint this poll saves
    append(log, b"\t\t   499 Query\tDELETE FROM orders\n\t\t   499 Query\tDROP TABLE order_items\n")
    poll(source)
    append(log, b"\t\t   499 Query\tTRUNCATE TABLE customers\n\t\t   499 Quit\t\n")
    append(log, b"261123 12:49:01\t   500 Connect\tcarol@localhost on shop using Socket\n")
    poll(source)
    crime = Event.objects.filter(server="db1", connection_id=499, destructive=True)
    assert sorted(crime.values_list("statement_type", flat=True)) == ["DELETE", "DROP TABLE", "TRUNCATE"]
    # Attributed to the account as text can hold it; the raw bytes keep the NUL.
    assert set(crime.values_list("user", flat=True)) == {"mallory"}
    assert bytes(Event.objects.get(server="db1", connection_id=499, command="Connect").raw) == connect
    assert Session.objects.get(server="db1", connection_id=499).user == "mallory"
    assert_nul_problem(source, connect)
    assert not IngestRun.objects.filter(source=source, status=IngestRun.Status.FAILED).exists()


@pytest.mark.parametrize(
    ("was", "hostile"),
    [
        (b'"program_name":"mysql"', b'"program_name":"my\\u0000sql"'),
        (b'"program_name":"mysql"', b'"program_name":"my\\u0000\\\\u0000sql"'),
        # Not NUL, but refused by PostgreSQL as well: a lone surrogate, which Python's json reads.
        (b'"user":"root"', b'"user":"ro\\ud800ot"'),
    ],
    ids=["nul", "nul-escaped-twice", "lone-surrogate-user"],
)
def test_a_nul_in_a_mcafee_program_name_does_not_stop_a_followed_json_log(
    tmp_path: Path, was: bytes, hostile: bytes
) -> None:
    log = tmp_path / "audit.json"
    first = MCAFEE.replace(was, hostile)
    assert first != MCAFEE
    log.write_bytes(first)
    source = follow(log, "json-audit")
    poll(source)
    delete = MCAFEE.replace(b'"cmd":"select"', b'"cmd":"delete"').replace(
        b"select @@version_comment limit 1", b"DELETE FROM shop.orders"
    )
    append(log, delete.replace(b"1516567908029", b"1516567909000").replace(b'"424"', b'"425"'))
    append(log, MCAFEE.replace(b"1516567908029", b"1516567910000").replace(b'"424"', b'"426"'))
    poll(source)
    assert Event.objects.filter(server="db1", statement_type="DELETE", destructive=True).count() == 1
    session = Session.objects.get(server="db1", connection_id=26)
    assert "\x00" not in (session.program or "") and (session.program or "").startswith("my")
    assert set(Event.objects.filter(server="db1").values_list("user", flat=True)) <= {"root", "ro\ufffdot"}
    assert_nul_problem(source, first.rstrip(b"\n"))


def test_a_nul_in_an_enterprise_program_name_does_not_stop_a_followed_json_log(tmp_path: Path) -> None:
    log = tmp_path / "audit.json"
    hostile = ENTERPRISE_CONNECT.replace(b'"program_name": "mysql"', b'"program_name": "my\\u0000sql"')
    log.write_bytes(hostile + ENTERPRISE_QUERY % (2, 1, b"SELECT 1"))
    source = follow(log, "json-audit")
    poll(source)
    append(log, ENTERPRISE_QUERY % (3, 2, b"DELETE FROM shop.orders"))
    append(log, ENTERPRISE_QUERY % (4, 3, b"SELECT 2"))
    poll(source)
    assert Event.objects.filter(server="db1", statement_type="DELETE", connection_id=13).count() == 1
    assert Session.objects.get(server="db1", connection_id=13).program == "mysql"
    assert_nul_problem(source, hostile.rstrip(b",\n"))
