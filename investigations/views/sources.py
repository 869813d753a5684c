"""The Sources pages: sources with their health, their runs with progress and problems, uploads.
HTMX polls the same views for the named partial that shows running ingests."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count, Max, Min, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from ingest.binlog_replica import spool_of
from ingest.follow import source_ingest_now
from ingest.models import Chunk, CustodyHead, CustodyLink, IngestRun, Source
from ingest.sources import SourceForm, source_health
from ingest.tasks import ingest_source_task
from ingest.uploads import upload_store
from investigations import trail
from investigations.forms import UploadForm
from investigations.roles import Role, role_required

RUNS_SHOWN = 30
PROBLEMS_SHOWN = 500
CHUNKS_SHOWN = 1000  # ranges of a shared-out backlog (a 64 GB backlog is 1,000 ranges of 64 MB)


def _queue(source_id: int, run_id: int) -> None:
    ingest_source_task.delay(source_id, run_id)


def _get_source(request: HttpRequest, source_id: int) -> Source:
    return get_object_or_404(Source, pk=source_id)


@require_GET
@role_required(Role.VIEWER)
def source_list(request: HttpRequest) -> HttpResponse:
    sources = [(s, source_health(s)) for s in Source.objects.order_by("kind", "name")]
    return render(request, "investigations/source_list.html", {"sources": sources})


@require_http_methods(["GET", "POST"])
@role_required(Role.ADMIN)  # changing what is read is for admins; every viewer may look
def source_edit(request: HttpRequest, source_id: int | None = None) -> HttpResponse:
    source = _get_source(request, source_id) if source_id else None
    form = SourceForm(request.POST or None, instance=source)
    if request.method == "POST" and form.is_valid():
        changed = form.changed_data
        source = form.save()
        action = trail.Action.SOURCE_EDIT if source_id else trail.Action.SOURCE_CREATE
        trail.record(request, action, source=source.pk, name=source.name, changed=changed)
        return HttpResponseRedirect(reverse("source-detail", args=[source.pk]))
    return render(request, "investigations/source_form.html", {"form": form, "source": source})


@require_GET
@role_required(Role.VIEWER)
@vary_on_headers("HX-Request")
def source_detail(request: HttpRequest, source_id: int) -> HttpResponse:
    source = _get_source(request, source_id)
    runs = list(source.runs.select_related("source_file").order_by("-started_at")[:RUNS_SHOWN])
    active = any(r.status in (IngestRun.Status.QUEUED, IngestRun.Status.RUNNING) for r in runs)
    template = "investigations/source_detail.html"
    if request.htmx:
        template += "#runs"
    context = {
        "source": source,
        "health": source_health(source),
        "runs": runs,
        "active": active,
        "files": source.files.order_by("-first_seen_at")[:50],
        "custody_head": CustodyHead.objects.filter(source=source).first(),
        "spool": spool_of(source) if source.kind == Source.Kind.BINLOG_REPLICA else None,
    }
    return render(request, template, context)


@require_POST
@role_required(Role.ADMIN)
def source_ingest(request: HttpRequest, source_id: int) -> HttpResponse:
    source = _get_source(request, source_id)
    run = source_ingest_now(source, _queue)
    trail.record(request, trail.Action.SOURCE_INGEST, source=source.pk, name=source.name, run=run.pk)
    return HttpResponseRedirect(reverse("source-detail", args=[source.pk]))


@require_GET
@role_required(Role.VIEWER)
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(IngestRun.objects.select_related("source", "source_file"), pk=run_id)
    problems = run.problem_set.select_related("source_file").order_by("source_file", "offset")[
        :PROBLEMS_SHOWN
    ]
    chunks = Chunk.objects.filter(split__run=run).select_related("source_file")[:CHUNKS_SHOWN]
    links = CustodyLink.objects.filter(source=run.source, ingest_run_id=run.pk).aggregate(
        batches=Count("pk"), first=Min("seq"), last=Max("seq"), events=Sum("event_count")
    )
    context = {"run": run, "problems": problems, "chunks": chunks, "custody": links}
    return render(request, "investigations/run_detail.html", context)


@require_http_methods(["GET", "POST"])
@role_required(Role.INVESTIGATOR)
def upload(request: HttpRequest) -> HttpResponse:
    """An investigator's log file: streamed to disk and hashed as it arrives (settings
    FILE_UPLOAD_HANDLERS), then ingested in the background; its page shows the progress."""
    form = UploadForm(request.POST or None, request.FILES or None)
    refused = getattr(request, "upload_refused", None)  # set while the body streamed in
    if refused:
        form.is_valid()
        form.errors["file"] = form.error_class([refused])
        return render(request, "investigations/upload.html", {"form": form}, status=413)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():  # the upload is recorded with its audit record, or neither
            source, _ = upload_store(
                uploaded=form.cleaned_data["file"],
                server=form.cleaned_data["server"],
                timezone=form.cleaned_data["timezone"],
                fmt=form.cleaned_data["format"],
                queue=_queue,
            )
            stored = source.files.first()
            trail.record(
                request,
                trail.Action.UPLOAD,
                source=source.pk,
                file=form.cleaned_data["file"].name,
                sha256=stored.sha256 if stored else None,
            )
        return HttpResponseRedirect(reverse("source-detail", args=[source.pk]))
    return render(request, "investigations/upload.html", {"form": form})
