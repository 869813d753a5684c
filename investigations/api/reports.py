"""REST API of a case's reports: asked for (queued for a worker), followed, downloaded with their
SHA-256 (the same workflow as the case page, in `investigations.reports.generate`)."""

from __future__ import annotations

from django.db import transaction
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from investigations import trail
from investigations.api.cases import CASE_ID, case_for, id_parameter, valid_data
from investigations.api.events import UtcDateTimeField
from investigations.models import Report
from investigations.reports.generate import CONTENT_TYPES, report_file, report_request
from investigations.roles import Role, role_permission
from investigations.tasks import generate_report

_REPORT_ID = id_parameter("report_id", "report", 3)


class ReportSerializer(serializers.ModelSerializer):
    generated_by = serializers.CharField(source="generated_by.username", read_only=True)
    requested_at = UtcDateTimeField(read_only=True)
    generated_at = UtcDateTimeField(read_only=True, allow_null=True)
    download = serializers.SerializerMethodField(help_text="Where to fetch the file once `status` is done")

    class Meta:
        model = Report
        fields = [
            "id",
            "case",
            "format",
            "status",
            "progress",
            "total",
            "sha256",
            "size",
            "generated_by",
            "requested_at",
            "generated_at",
            "error",
            "download",
        ]
        read_only_fields = fields

    def get_download(self, report: Report) -> str | None:
        if report.status != Report.Status.DONE:
            return None
        url = reverse("api-report-download", args=[report.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url


class ReportInputSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=Report.Format.choices)


@extend_schema(
    parameters=[CASE_ID],
    request=ReportInputSerializer,
    responses={200: ReportSerializer(many=True), 202: ReportSerializer},
    summary="A case's reports",
    description="GET lists the case's reports, newest first; POST asks for one (`format`: pdf, csv or "
    "json) and answers 202 with it, queued: a worker writes it (follow `status` and `progress` at "
    "/api/v1/reports/<id>/; `download` is set once it is done).",
    examples=[OpenApiExample("a PDF", {"format": "pdf"}, request_only=True)],
)
@api_view(["GET", "POST"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def case_reports(request: Request, case_id: int) -> Response:
    case = case_for(request, case_id, change=True)
    if request.method == "POST":
        data = valid_data(ReportInputSerializer(data=request.data))
        with transaction.atomic():
            report = report_request(
                case=case, fmt=data["format"], user=request.user, queue=lambda pk: generate_report.delay(pk)
            )
        report.refresh_from_db()
        trail.record(
            request,
            trail.Action.REPORT_CREATE,
            case=case.pk,
            report=report.pk,
            format=report.format,
            status=report.status,
            sha256=report.sha256,
        )
        return Response(
            ReportSerializer(report, context={"request": request}).data, status=status.HTTP_202_ACCEPTED
        )
    reports = case.reports.select_related("generated_by")
    return Response(ReportSerializer(reports, many=True, context={"request": request}).data)


@extend_schema(
    parameters=[_REPORT_ID],
    responses=ReportSerializer,
    summary="A report and its progress",
    description="`status` (queued, running, done, failed), `progress` of `total` evidence events, the "
    "file's `sha256` and `size` once done, and its `download` URL.",
)
@api_view(["GET"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def report_detail(request: Request, report_id: int) -> Response:
    report = get_object_or_404(Report.objects.select_related("generated_by"), pk=report_id)
    return Response(ReportSerializer(report, context={"request": request}).data)


@extend_schema(
    parameters=[_REPORT_ID],
    responses={(200, media): OpenApiTypes.BINARY for media in CONTENT_TYPES.values()},
    summary="Download a report",
    description="The report's file (PDF, CSV or JSON) as an attachment; its SHA-256 is in the "
    "`X-Content-SHA256` header and at /api/v1/reports/<id>/. 404 until the report is done.",
)
@api_view(["GET"])
@permission_classes([role_permission(Role.INVESTIGATOR)])
def report_download(request: Request, report_id: int) -> FileResponse:
    return report_file(request, report_id)
