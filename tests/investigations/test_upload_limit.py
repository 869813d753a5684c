"""Uploads larger than MAX_UPLOAD_BYTES are refused with a clear message, whether the request
says its length or the bytes only show it while they stream; nothing of them is kept."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import BOUNDARY, encode_multipart

from ingest.models import Source
from ingest.uploads import HashedUpload

pytestmark = pytest.mark.django_db

FIELDS = {"server": "db9", "format": "auto", "timezone": "UTC"}


def upload(client, body: bytes, **extra):
    return client.post("/sources/upload/", {"file": SimpleUploadedFile("big.log", body), **FIELDS}, **extra)


def left_in(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def test_a_file_over_the_limit_is_refused_while_it_streams(investigator_client, settings, tmp_path) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.MAX_UPLOAD_BYTES = 200_000  # the request is under limit + room for the form: read, then cut
    refused = upload(investigator_client, b"x" * 200_001)
    assert refused.status_code == 413
    html = refused.content.decode()
    assert "larger than the limit of" in html and "200,000 bytes, set by MAX_UPLOAD_BYTES" in html
    assert not Source.objects.exists() and left_in(settings.UPLOAD_DIR) == []


def test_a_request_declaring_more_than_the_limit_is_refused_before_anything_is_written(
    investigator_client, settings, tmp_path
) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.MAX_UPLOAD_BYTES = 1000
    body = encode_multipart(BOUNDARY, {"file": io.BytesIO(b"y" * 1_100_000), **FIELDS})
    assert len(body) > 1000 + 1024 * 1024
    as_is = f"multipart/form-data; boundary={BOUNDARY}"  # the client sends these bytes unchanged
    refused = investigator_client.post("/sources/upload/", body, content_type=as_is)
    assert refused.status_code == 413 and "1,000 bytes" in refused.content.decode()
    assert not Source.objects.exists() and left_in(settings.UPLOAD_DIR) == []


def test_a_file_at_the_limit_is_taken(investigator_client, settings, tmp_path) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.MAX_UPLOAD_BYTES = 5000
    taken = upload(investigator_client, b"z" * 5000)
    assert taken.status_code == 302 and Source.objects.get().files.get().size == 5000


def test_an_upload_streams_into_upload_dir_itself(settings, tmp_path) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    kept = HashedUpload("a.log", "text/plain", 0, None, None)
    try:
        assert Path(kept.temporary_file_path()).parent == settings.UPLOAD_DIR
    finally:
        kept.close()


def test_an_upload_dir_on_another_filesystem_than_tmp_takes_the_file(investigator_client, settings) -> None:
    """As in the compose deployment (a volume): keeping the upload must not be a cross-device rename."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == Path(tempfile.gettempdir()).stat().st_dev:
        pytest.skip("no second filesystem beside the temporary folder here (/dev/shm)")
    with tempfile.TemporaryDirectory(dir=shm) as other:
        settings.UPLOAD_DIR = Path(other) / "uploads"
        taken = upload(investigator_client, b"q" * 3000)
        assert taken.status_code == 302
        kept = Path(Source.objects.get().files.get().path)
        assert kept.is_relative_to(settings.UPLOAD_DIR) and kept.read_bytes() == b"q" * 3000
