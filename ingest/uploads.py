"""Uploaded log files: streamed to disk chunk by chunk and hashed on the way (SHA-256, kept as
evidence), never held in memory, whatever their size."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import TemporaryUploadedFile, UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.db import transaction

from ingest.checkpoints import find_candidates
from ingest.custody import chain_file_hash
from ingest.follow import source_ingest_now
from ingest.models import IngestRun, Source, SourceFile


class HashedUpload(TemporaryUploadedFile):
    """An upload as HashingUploadHandler keeps it: a temporary file in UPLOAD_DIR itself, so that
    keeping it is a rename (never a copy across filesystems), with the SHA-256 of its bytes."""

    sha256: str

    def __init__(
        self, name: str, content_type: str, size: int, charset: str | None, extra: dict[str, bytes] | None
    ) -> None:
        settings.UPLOAD_DIR.mkdir(parents=True, exist_ok=True)
        file = tempfile.NamedTemporaryFile(suffix=".upload", dir=settings.UPLOAD_DIR)  # noqa: SIM115
        UploadedFile.__init__(self, file, name, content_type, size, charset, extra)


# Room for the form's other fields beside the file in a request's declared length.
FORM_ROOM = 1024 * 1024


def upload_limit_text() -> str:
    limit = settings.MAX_UPLOAD_BYTES
    return f"{limit / 1024**3:.3g} GiB ({limit:,} bytes, set by MAX_UPLOAD_BYTES)"


class HashingUploadHandler(FileUploadHandler):
    """Writes each uploaded file into UPLOAD_DIR as it arrives, hashing every chunk. A file
    larger than MAX_UPLOAD_BYTES is refused: at once when the request says its length, else
    as soon as that many bytes have come (what was written is deleted). The request then
    carries `upload_refused`, the reason, for the page to show."""

    def _refuse(self) -> None:
        reason = f"The file is larger than the limit of {upload_limit_text()}."
        self.request.upload_refused = reason  # type: ignore[union-attr]  # our attribute, read by the upload page
        if hasattr(self, "file"):
            self.file.close()  # a temporary file: closing deletes it
        raise StopUpload(connection_reset=False)  # Django reads and drops the rest of the body

    def new_file(
        self,
        field_name: str,
        file_name: str,
        content_type: str,
        content_length: int | None,
        charset: str | None = None,
        content_type_extra: dict[str, bytes] | None = None,
    ) -> None:
        super().new_file(field_name, file_name, content_type, content_length, charset, content_type_extra)
        declared = int(self.request.META.get("CONTENT_LENGTH") or 0)  # type: ignore[union-attr]  # Django gives every handler its request
        if declared > settings.MAX_UPLOAD_BYTES + FORM_ROOM:
            self._refuse()
        self.sha256 = hashlib.sha256()
        self.file = HashedUpload(file_name, content_type, 0, charset, content_type_extra)
        self.size = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        if self.size + len(raw_data) > settings.MAX_UPLOAD_BYTES:
            self._refuse()
        self.sha256.update(raw_data)
        self.file.write(raw_data)
        self.size += len(raw_data)
        return None

    def file_complete(self, file_size: int) -> HashedUpload:
        self.file.seek(0)
        self.file.size = file_size
        self.file.sha256 = self.sha256.hexdigest()
        return self.file


def upload_store(
    *, uploaded: HashedUpload, server: str, timezone: str, fmt: str, queue: Callable[[int, int], object]
) -> tuple[Source, IngestRun]:
    """Keep an uploaded file (moved, not copied, into UPLOAD_DIR), record it with its SHA-256 as an
    upload source with its one file, and queue its ingest on commit."""
    target_dir = Path(settings.UPLOAD_DIR) / uuid.uuid4().hex
    target_dir.mkdir(parents=True)
    name = upload_file_name(uploaded.name or "")
    target = target_dir / name
    os.replace(uploaded.temporary_file_path(), target)  # same folder tree: a rename
    try:
        os.chmod(target, 0o440)
        return _upload_record(uploaded, target, name, server=server, timezone=timezone, fmt=fmt, queue=queue)
    except BaseException:
        # Nothing recorded (the transaction rolled back): nothing kept, no file left behind.
        target.unlink(missing_ok=True)
        target_dir.rmdir()
        raise


# Characters an uploaded file's name loses on disk: glob's (a source's path is a pattern, matched
# again at every poll), path separators, and controls. The name as sent stays in the audit trail.
_UNSAFE_IN_NAME = re.compile(r"[*?\[\]/\\\x00-\x1f\x7f]")
MAX_NAME_BYTES = 120  # file systems allow 255 bytes a name; the source's name holds it with room


def upload_file_name(sent: str) -> str:
    """The name an uploaded file is kept under: the client's (its last part), with glob
    characters, separators and controls as `_`, cut to MAX_NAME_BYTES of UTF-8 keeping its end
    (`.log.gz` says what it is)."""
    name = _UNSAFE_IN_NAME.sub("_", os.path.basename(sent.replace("\\", "/"))).lstrip(".") or "upload.log"
    if len(name.encode()) > MAX_NAME_BYTES:
        tail = name[-20:]
        head = name[: len(name) - 20].encode()[: MAX_NAME_BYTES - len(tail.encode()) - 1]
        name = head.decode("utf-8", "ignore") + "_" + tail
    return name


def _upload_record(
    uploaded: HashedUpload, target: Path, name: str, *, server: str, timezone: str, fmt: str,
    queue: Callable[[int, int], object],
) -> tuple[Source, IngestRun]:  # fmt: skip
    errors: list[str] = []
    (candidate,) = find_candidates(glob.escape(str(target)), errors)
    with transaction.atomic():
        source = Source.objects.create(
            name=f"upload {name} ({target.parent.name[:8]})",
            kind=Source.Kind.UPLOAD,
            path=glob.escape(str(target)),  # a pattern: the folder's name may hold [ or *
            format=fmt,
            server=server,
            timezone=timezone,
            enabled=False,  # read once, not polled
        )
        SourceFile.objects.create(
            source=source,
            path=str(target),
            compressed=candidate.compressed,
            size=candidate.size,
            head_sha256=candidate.head_sha256,
            head_length=len(candidate.head),
            content_head=candidate.head_sha256,  # (ingest.identity: an upload of bytes read before)
            device=candidate.device,
            inode=candidate.inode,
            received_sha256=uploaded.sha256,
            resume={"offset": 0, "line": 1, "last_time": None},
        )
        chain_file_hash(
            source_id=source.pk,
            source_file_id=SourceFile.objects.get(source=source).pk,
            file_bytes=candidate.size,
            sha256=uploaded.sha256,
            scope="received",
        )
        run = source_ingest_now(source, queue)
    return source, run
