"""`--format auto`: every sample of the corpus is recognised as its own format from its first KiB."""

from __future__ import annotations

import pytest

from ingest.parsers.detect import HEAD_BYTES, UnknownFormat, detect_format

from ..conftest import CORPUS_MISSING, FIXTURES, SHARED

CORPUS = SHARED / "corpus"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=CORPUS_MISSING)

FOLDER_FORMATS = {
    "general-log-file": "general-log",
    "mariadb-server-audit": "mariadb-audit",
    "mcafee-json": "json-audit",
}
# Files that are not logs, or logs no server writes as such: never taken for one.
NOT_LOGS = {
    "general-log-file/percona-toolkit_genlog001.pt-query-digest-expected-report.txt",
    "general-log-file/percona-toolkit_genlog002.pt-query-digest-expected-report.txt",
    "general-log-file/percona-toolkit_genlog003.pt-query-digest-expected-report.txt",
    "general-log-file/percona-toolkit_genlog005.pt-query-digest-expected-report.txt",
    "general-log-table/mariadb-docs_mysql.general_log-table_SELECT-vertical.txt",  # client \\G output
    "other/pgaudit_expected_pgaudit.out_regression-NOTICE-AUDIT-lines.txt",  # PostgreSQL's, not ours
    "mariadb-server-audit/mariadb-docs_syslog-output_soft-hyphen_missing-spaces.log",  # mangled by the docs
    "percona-audit/ps-auditlog-remix_5.6-patched_CSV_hard-wrapped-lines.csv.txt",  # wrapped by hand
}


def expected_format(relative: str) -> str:
    folder, name = relative.split("/", 1)
    if folder in FOLDER_FORMATS:
        return FOLDER_FORMATS[folder]
    if "xml" in name.lower():
        return "xml-audit"
    if "csv" in name.lower():
        return "audit-csv"
    return "json-audit"


@needs_corpus
def test_every_corpus_log_is_recognised_as_its_format() -> None:
    seen = 0
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file() or path.suffix == ".md":
            continue
        relative = str(path.relative_to(CORPUS))
        head = path.read_bytes()[:HEAD_BYTES]
        if relative in NOT_LOGS:
            with pytest.raises(UnknownFormat):
                detect_format(head)
        else:
            assert detect_format(head) == expected_format(relative), relative
            seen += 1
    assert seen >= 40


def test_the_real_mariadb_fixtures_are_recognised() -> None:
    for path in (FIXTURES / "genlog").glob("*.log"):
        assert detect_format(path.read_bytes()[:HEAD_BYTES]) == "general-log"
    for path in (FIXTURES / "server_audit").glob("*.log"):
        assert detect_format(path.read_bytes()[:HEAD_BYTES]) == "mariadb-audit"
    syslog = list((FIXTURES / "server_audit_syslog").glob("*.log"))
    assert len(syslog) == 4  # RFC 3164 with and without host, RFC 3339 time, RFC 5424
    for path in syslog:
        assert detect_format(path.read_bytes()[:HEAD_BYTES]) == "mariadb-audit", path.name
    for path in (FIXTURES / "general_log_table").glob("*.CSV"):
        assert detect_format(path.read_bytes()[:HEAD_BYTES]) == "general-log-csv"
    for path in (FIXTURES / "general_log_table").glob("*.tsv"):
        assert detect_format(path.read_bytes()[:HEAD_BYTES]) == "general-log-tsv"


def test_an_unknown_head_names_what_was_tried_and_its_first_line() -> None:
    with pytest.raises(UnknownFormat) as caught:
        detect_format(b"\x00\x01binary first line\nsecond\n")
    message = str(caught.value)
    assert "json-audit, xml-audit, audit-csv, general-log-csv, general-log-tsv, mariadb-audit" in message
    assert "'\\x00\\x01binary first line'" in message
