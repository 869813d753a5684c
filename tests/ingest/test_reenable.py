"""Logging switched back on by whoever switched it off is `anti_forensic` too: both ends of the
act show. Real MariaDB 10.11 logs (tests/fixtures/reenable/regenerate.py)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from ingest.models import CustodyLink, Event
from ingest.sql import log_switches

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)
HERE = FIXTURES / "reenable"
GENERAL = HERE / "mariadb-10.11.19-general.log"
AUDIT_OLDER = HERE / "mariadb-10.11.19-server_audit.log.1"
AUDIT = HERE / "mariadb-10.11.19-server_audit.log"


def ingest(*paths: object) -> None:
    call_command("ingest", *map(str, paths), "--server", "db1", "--timezone", "UTC", stdout=io.StringIO())


def switches(path: object) -> list[tuple[str | None, str, bool]]:
    """(user, statement, flagged anti_forensic) of the statements of `path` that switch a log."""
    rows = Event.objects.filter(source_file__path=str(path), command="Query").order_by("byte_offset")
    return [(e.user, e.sql, "anti_forensic" in e.flags) for e in rows if log_switches(e.sql)]


def test_it_flags_the_culprit_switching_back_on_and_not_the_operator() -> None:
    ingest(AUDIT_OLDER, AUDIT)  # the rotated pair, older first
    assert switches(AUDIT_OLDER) == [
        ("root", "SET GLOBAL server_audit_logging = ON", False),  # nobody had switched it off
        ("re_mallory", "SET GLOBAL general_log = OFF", True),
        ("re_mallory", "SET GLOBAL general_log = ON", True),  # the same session switches it back
        ("re_mallory", "SET SESSION sql_log_bin = 0", True),
        ("re_mallory", "SET SESSION sql_log_bin = 1", True),
        ("re_mallory", "SET GLOBAL log_output = 'NONE'", True),
    ]
    assert switches(AUDIT) == [
        # Another session of the same account, in the next file of the rotated log.
        ("re_mallory", "SET GLOBAL log_output = 'FILE'", True),
        ("re_mallory", "SET GLOBAL general_log = OFF", True),
        # The operator repairing what the culprit did is no culprit.
        ("re_dave", "SET GLOBAL general_log = ON", False),
        ("root", "SET GLOBAL server_audit_logging = OFF", True),
    ]


def test_it_flags_a_switch_back_on_whose_switch_off_an_earlier_read_stored() -> None:
    ingest(AUDIT_OLDER)
    links = CustodyLink.objects.filter(kind="flags").count()
    ingest(AUDIT)  # another read, with nothing carried over from the first: the store knows
    assert switches(AUDIT)[0] == ("re_mallory", "SET GLOBAL log_output = 'FILE'", True)
    assert ("re_dave", "SET GLOBAL general_log = ON", False) in switches(AUDIT)
    # The flag reached an event already stored: the custody chain says so.
    assert CustodyLink.objects.filter(kind="flags").count() == links + 1


def test_it_flags_a_switch_back_on_whose_switch_off_only_another_log_shows() -> None:
    # The general log has mallory's log_output = 'NONE' (and nothing after it until 'FILE');
    # only the newer server_audit file (its older file is gone) has her log_output = 'FILE'.
    ingest(GENERAL)
    links = CustodyLink.objects.filter(kind="flags").count()
    ingest(AUDIT)
    assert switches(AUDIT)[0] == ("re_mallory", "SET GLOBAL log_output = 'FILE'", True)
    assert ("re_dave", "SET GLOBAL general_log = ON", False) in switches(AUDIT)
    # The flag reached an event already stored: the custody chain says so.
    assert CustodyLink.objects.filter(kind="flags").count() == links + 1


def test_a_switch_back_on_with_no_switch_off_before_it_stays_unflagged() -> None:
    ingest(AUDIT)  # mallory's log_output = 'NONE' is in the older file, not read
    assert switches(AUDIT)[0] == ("re_mallory", "SET GLOBAL log_output = 'FILE'", False)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SET GLOBAL general_log = 1", (("general_log", True),)),
        ("SET @@global.general_log = 'OFF'", (("general_log", False),)),
        ("SET GLOBAL log_output = 'TABLE,FILE'", (("log_output", True),)),
        ("SET GLOBAL log_output = 'FILE,NONE'", (("log_output", False),)),
        ("SET GLOBAL audit_log_disable = OFF", (("audit_log_disable", True),)),
        ("SET sql_log_bin = ON", (("sql_log_bin", True),)),
        ("INSTALL SONAME 'server_audit'", (("audit_plugin", True),)),
        ("INSTALL PLUGIN audit_log SONAME 'audit_log.so'", (("audit_plugin", True),)),
        ("UNINSTALL PLUGIN server_audit", (("audit_plugin", False),)),
        ("INSTALL SONAME 'ha_rocksdb'", ()),
        ("SET STATEMENT sql_log_bin = 0 FOR DELETE FROM t", ()),  # for that statement only
        ("SET @general_log = 1", ()),  # a user variable
    ],
)
def test_it_reads_what_a_statement_switches(sql: str, expected: tuple[tuple[str, bool], ...]) -> None:
    assert log_switches(sql) == expected
