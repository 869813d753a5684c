"""The Django admin for what AuditWeb reads: sources are edited here; what was read (files,
runs, problems, gaps) is evidence and only shown."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from ingest.models import CustodyLink, Gap, IngestRun, ParseProblem, Source, SourceFile
from ingest.sources import SourceForm, source_health


class ReadOnly(admin.ModelAdmin):
    """Evidence: shown, never added, changed or deleted through the admin."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    form = SourceForm  # the same validation as the Sources page and the API: no password in a DSN
    list_display = ["name", "kind", "format", "server", "timezone", "interval_seconds", "enabled", "health"]
    list_filter = ["kind", "format", "enabled"]
    search_fields = ["name", "server", "path"]
    readonly_fields = [
        "checkpoint",
        "created_at",
        "last_polled_at",
        "last_data_at",
        "last_error",
        "next_poll_at",
    ]

    @admin.display(description="health")
    def health(self, source: Source) -> str:
        h = source_health(source)
        return "; ".join([h.state, *h.reasons])


@admin.register(SourceFile)
class SourceFileAdmin(ReadOnly):
    list_display = [
        "path",
        "source",
        "size",
        "bytes_read",
        "finished",
        "device",
        "inode",
        "sha256",
        "hashed_bytes",
        "received_sha256",
        "last_read_at",
    ]
    search_fields = ["path", "sha256", "received_sha256"]


@admin.register(IngestRun)
class IngestRunAdmin(ReadOnly):
    list_display = ["pk", "source", "status", "started_at", "finished_at", "events_stored", "problems"]
    list_filter = ["status"]


@admin.register(ParseProblem)
class ParseProblemAdmin(ReadOnly):
    list_display = ["source_file", "line", "offset", "reason", "excerpt_text"]
    search_fields = ["reason"]


@admin.register(Gap)
class GapAdmin(ReadOnly):
    list_display = ["server", "reason", "started_at", "ended_at", "source_file", "line"]
    list_filter = ["reason", "server"]


@admin.register(CustodyLink)
class CustodyLinkAdmin(ReadOnly):
    """The chain of custody (ingest.custody): what each link recorded, and its hash."""

    list_display = [
        "source",
        "seq",
        "kind",
        "committed_at",
        "source_file",
        "event_count",
        "file_bytes",
        "link_hash",
    ]
    list_filter = ["kind"]
    search_fields = ["source__name", "file_sha256"]

    @admin.display(description="hash")
    def link_hash(self, link: CustodyLink) -> str:
        return bytes(link.hash).hex()
