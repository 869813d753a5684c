"""File sources read only inside the log roots (AUDITWEB_LOG_ROOTS; in tests, pytest's temporary
folder too): a path or glob outside them is refused when the source is made, and a symbolic link
out of them is never followed, when the source is made or at any later poll (issue 18, item 8).
A file that is no log shows no excerpt of its bytes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ingest.chunks import unpack
from ingest.follow import ingest_source
from ingest.models import Event, IngestRun, ParseProblem, RawChunk, Source
from tests.logwriter import GeneralLogWriter

pytestmark = pytest.mark.django_db

OUTSIDE = "/etc/passwd"  # readable by everyone, outside every log root, and no log
SECRET_LINE = Path(OUTSIDE).read_bytes().split(b"\n", 1)[0]


def new_source(client: Any, path: str, fmt: str = "general-log") -> Any:
    return client.post(
        "/api/v1/sources/",
        {"name": f"src {path}", "kind": "file", "path": path, "server": "db1", "format": fmt},
        format="json",
    )


def nothing_of_the_secret_is_stored() -> None:
    for excerpt in ParseProblem.objects.values_list("excerpt", flat=True):
        assert SECRET_LINE not in bytes(excerpt)
    # (Raw bytes are inline or in chunks of the file's content since issue 22: both are looked at.)
    assert not any(SECRET_LINE[:20] in e.raw for e in Event.objects.all())
    assert not any(SECRET_LINE[:20] in unpack(c.data) for c in RawChunk.objects.all())


@pytest.mark.parametrize("path", [OUTSIDE, "/etc/*", "/var/log/../../etc/passwd", "relative/general.log"])
def test_a_path_outside_the_log_roots_is_refused(admin_api_client: Any, path: str) -> None:
    response = new_source(admin_api_client, path)
    assert response.status_code == 400
    assert "path" in response.json()
    assert not Source.objects.exists()


def test_a_glob_matching_a_link_out_of_the_roots_is_refused(admin_api_client: Any, tmp_path: Path) -> None:
    GeneralLogWriter(tmp_path / "general.log").write(5)
    (tmp_path / "general.log.1").symlink_to(OUTSIDE)
    response = new_source(admin_api_client, str(tmp_path / "general.log*"))
    assert response.status_code == 400
    assert "leads outside" in str(response.json()["path"])
    (tmp_path / "linked").symlink_to("/etc")
    assert new_source(admin_api_client, str(tmp_path / "linked" / "*")).status_code == 400


def test_a_link_out_of_the_roots_made_later_is_never_read(admin_api_client: Any, tmp_path: Path) -> None:
    writer = GeneralLogWriter(tmp_path / "general.log")
    writer.write(40)
    response = new_source(admin_api_client, str(tmp_path / "general.log*"))
    assert response.status_code == 201, response.json()
    source = Source.objects.get(pk=response.json()["id"])
    run = ingest_source(source.pk)
    assert run is not None and run.status == IngestRun.Status.DONE
    # Then someone who can write in the log folder (a compromised logrotate...) adds a link.
    os.symlink(OUTSIDE, tmp_path / "general.log.0")
    writer.write(40)
    run = ingest_source(source.pk)
    assert run is not None and run.status == IngestRun.Status.DONE
    nothing_of_the_secret_is_stored()
    assert "leads outside the log roots" in Source.objects.get(pk=source.pk).last_error
    assert Event.objects.filter(server="db1").count() == 80  # the log itself goes on being read


def test_a_source_made_before_the_rule_reads_nothing_outside(tmp_path: Path) -> None:
    source = Source.objects.create(name="old", kind=Source.Kind.FILE, path=OUTSIDE, server="db1",
                                   format="general-log")  # fmt: skip
    ingest_source(source.pk)
    nothing_of_the_secret_is_stored()
    assert "leads outside" in Source.objects.get(pk=source.pk).last_error


def test_a_file_that_is_no_log_shows_no_excerpt(tmp_path: Path, admin_client: Any) -> None:
    """A copy of a secret inside a log folder, read as a general log: its lines are problems, and
    none shows its bytes, on the run's page or anywhere."""
    copy = tmp_path / "general.log"
    record = b"2026-03-01T09:00:00.000000Z\t  100 Query\tSELECT %d\n"
    copy.write_bytes(Path(OUTSIDE).read_bytes() + record % 1 + record % 2)
    source = Source.objects.create(name="copy", kind=Source.Kind.FILE, path=str(copy), server="db1",
                                   format="general-log")  # fmt: skip
    run = ingest_source(source.pk)
    assert run is not None and run.problems > 0
    assert set(ParseProblem.objects.filter(run=run).values_list("excerpt", flat=True)) == {b""}
    page = admin_client.get(f"/sources/runs/{run.pk}/")
    assert page.status_code == 200 and SECRET_LINE.decode() not in page.content.decode()


def test_a_followed_file_of_no_known_format_fails_without_quoting_it(tmp_path: Path) -> None:
    copy = tmp_path / "general.log"
    copy.write_bytes(Path(OUTSIDE).read_bytes())
    source = Source.objects.create(name="auto", kind=Source.Kind.FILE, path=str(copy), server="db1")
    with pytest.raises(ValueError, match="no log AuditWeb knows"):
        ingest_source(source.pk)
    run = IngestRun.objects.get(source=source)
    assert SECRET_LINE.decode()[:12] not in run.error
