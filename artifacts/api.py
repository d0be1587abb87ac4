"""REST API of artifacts (``/api/v1/artifacts/``): upload a file to a run (streamed to the
storage, never whole in memory), list and read them, download their content (byte ranges,
safe types: ``artifacts.serving``), delete them.

Thin views: parse, call one service or selector of ``artifacts.services`` /
``artifacts.selectors``, render. Permissions are the run's: see ``ArtifactViewSet``.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentops.api import ErrorSerializer, NewestFirstPagination, actor_for
from artifacts import selectors, services, serving
from artifacts.models import Artifact
from artifacts.serializers import (
    ArtifactFilter,
    ArtifactSerializer,
    ContentQuerySerializer,
    DeleteQuerySerializer,
    UploadQuerySerializer,
)
from projects.api import ProjectActionPermissions, access_for

_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No artifact with this id.")
_RANGE = OpenApiParameter(
    "Range",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="One byte range (`bytes=0-1023`, `bytes=1024-`, `bytes=-512`): a 206 with "
    "Content-Range; several ranges get the whole file (200).",
)


class LengthRequired(exceptions.APIException):
    """An upload without Content-Length (HTTP 411): the body's size must be known."""

    status_code = status.HTTP_411_LENGTH_REQUIRED
    default_detail = "an upload needs a Content-Length header"
    default_code = "length_required"


class IdempotencyKeyReused(exceptions.APIException):
    """An upload's ``Idempotency-Key`` named another upload (HTTP 422, as the API's other
    ``Idempotency-Key`` headers)."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "this Idempotency-Key was already used for a different request"
    default_code = "idempotency_key_reused"


# The API's ``Idempotency-Key`` header (``runs.idempotency``, which this app sits below): the
# same key and body give the first upload's artifact again.
IDEMPOTENCY_KEY = "Idempotency-Key"
_IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    IDEMPOTENCY_KEY,
    type={
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": "^[!-~]([ -~]*[!-~])?$",
    },
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "Makes a retried upload safe: the same key with the same run, step, name, type and "
        "bytes answers the first upload's artifact (header Idempotent-Replayed: true) and "
        "stores nothing; the same key with anything else is a 422; the same key while the "
        "first upload is being stored is a 409. A key lasts as long as its artifact and "
        "belongs to the uploader in the run's project."
    ),
)


def _idempotency_key(request: Request) -> str | None:
    """The request's ``Idempotency-Key`` (None: none).

    Raises:
        ValidationError: not 1 to 255 visible ASCII characters (400).
    """
    key = request.headers.get(IDEMPOTENCY_KEY)
    if key is not None and (not 0 < len(key) <= 255 or not key.isascii() or not key.isprintable()):
        raise exceptions.ValidationError(
            {IDEMPOTENCY_KEY: "must be 1 to 255 visible ASCII characters"}
        )
    return key


def _content_length(request: Request) -> int:
    raw = request.META.get("CONTENT_LENGTH") or ""
    if not raw.isdigit():
        raise LengthRequired()
    return int(raw)


@extend_schema(tags=["artifacts"])
@extend_schema_view(
    list=extend_schema(summary="List artifacts, newest first (cursor pages)."),
    retrieve=extend_schema(
        summary="One artifact's description.", responses={200: ArtifactSerializer, 404: _NOT_FOUND}
    ),
)
class ArtifactViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Artifacts: files agents and tools produced during runs.

    Permissions are the run's: list, read and download ``runs.view_run``; upload and delete
    ``runs.drive_run`` (operators, and the client tokens of the project). An artifact or run
    the user may not see is a 404.
    """

    lookup_value_converter = "uuid"
    permission_classes = [ProjectActionPermissions]
    view_permission = "runs.view_run"
    not_found = "artifact not found"
    action_permissions = {
        "list": ("runs.view_run",),
        "retrieve": ("runs.view_run",),
        "content": ("runs.view_run",),
        "create": ("runs.drive_run",),
        "destroy": ("runs.drive_run",),
    }
    filterset_class = ArtifactFilter
    pagination_class = NewestFirstPagination
    serializer_class = ArtifactSerializer

    def get_queryset(self) -> QuerySet[Artifact]:
        """The artifacts of the projects the user may see."""
        return access_for(self.request).scope(selectors.artifact_list(), "runs.view_run")

    def project_id_of(self, pk: uuid.UUID) -> int | None:
        """The project of artifact ``pk`` (None: none), for ``ProjectActionPermissions``."""
        return Artifact.objects.filter(pk=pk).values_list("project_id", flat=True).first()

    @extend_schema(
        summary="Upload a file to a run: the body is the file, its Content-Type the declared type.",
        parameters=[UploadQuerySerializer, _IDEMPOTENCY_KEY_PARAMETER],
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={
            201: ArtifactSerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="A bad name or media type, content that is not the declared "
                "type, or a body shorter or longer than its Content-Length.",
            ),
            404: OpenApiResponse(ErrorSerializer, description="No such run or step."),
            411: OpenApiResponse(ErrorSerializer, description="No Content-Length."),
            413: OpenApiResponse(ErrorSerializer, description="Over the project's limit."),
        },
    )
    def create(self, request: Request) -> Response:
        """Stream the body to the storage as an artifact of the run (``artifact_upload``)."""
        query = UploadQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        run_id = query.validated_data["run"]
        self._check_run(run_id)
        length = _content_length(request)
        upload: dict[str, Any] = {
            "run_id": run_id,
            "step_id": query.validated_data.get("step"),
            "name": query.validated_data["name"],
            "declared_type": request.content_type or "",
            # Django's request reads its body (spooled to disk by the handler) on demand.
            "stream": request.stream,
            "content_length": length,
            "actor": actor_for(request),
        }
        key = _idempotency_key(request)
        if key is None:
            artifact = services.artifact_upload(**upload)
            return Response(ArtifactSerializer(artifact).data, status=status.HTTP_201_CREATED)
        try:
            done = services.artifact_upload_once(idempotency_key=key, **upload)
        except services.KeyReused as exc:
            raise IdempotencyKeyReused(str(exc)) from None
        headers = {"Idempotent-Replayed": "true"} if done.replayed else {}
        return Response(
            ArtifactSerializer(done.artifact).data, status=status.HTTP_201_CREATED, headers=headers
        )

    def _check_run(self, run_id: uuid.UUID) -> None:
        """Refuse an upload to a run the user may not see (404) or not drive (403)."""
        project_id = services.run_project_id(run_id)
        access = access_for(self.request)
        if project_id is None or not access.can("runs.view_run", project_id):
            raise exceptions.NotFound("run not found")
        if not access.can("runs.drive_run", project_id):
            raise exceptions.PermissionDenied(
                "your role in this project does not allow it (needs runs.drive_run)"
            )

    @extend_schema(
        summary="Delete an artifact and its file (audited, with the reason).",
        parameters=[DeleteQuerySerializer],
        responses={204: None, 404: _NOT_FOUND},
    )
    def destroy(self, request: Request, pk: uuid.UUID) -> Response:
        """``artifact_delete``."""
        query = DeleteQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        services.artifact_delete(
            artifact_id=pk, actor=actor_for(request), reason=query.validated_data["reason"]
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Download an artifact's content (streamed; byte ranges served).",
        parameters=[ContentQuerySerializer, _RANGE],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            (206, "application/octet-stream"): OpenApiTypes.BINARY,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer, description="The stored file is missing or was altered."
            ),
            416: OpenApiResponse(description="The range starts past the end of the file."),
        },
    )
    @action(detail=True, methods=["get"])
    def content(self, request: Request, pk: uuid.UUID) -> HttpResponseBase:
        """The content, as ``artifacts.serving`` says: a safe type, inline or attachment,
        sandboxed, one byte range at most."""
        query = ContentQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        artifact = self.get_object()
        headers = serving.headers(artifact, download=query.validated_data["download"])
        try:
            byte_range = serving.requested_range(
                request.headers.get("Range"), request.headers.get("If-Range"), artifact
            )
        except serving.Unsatisfiable as exc:
            headers["Content-Range"] = str(exc)
            return HttpResponse(status=416, headers=headers)
        start, stop = byte_range or (0, artifact.size)
        headers["Content-Length"] = str(stop - start)
        code = 200
        if byte_range is not None:
            code = 206
            headers["Content-Range"] = f"bytes {start}-{stop - 1}/{artifact.size}"
        if request.method == "HEAD":
            return HttpResponse(status=code, headers=headers)
        chunks = services.artifact_open(artifact=artifact, start=start, stop=stop)
        # Served by ASGI (no WSGI input), the response must iterate asynchronously
        # (``serving.as_async``).
        content: Any = chunks if "wsgi.input" in request.META else serving.as_async(chunks)
        return StreamingHttpResponse(content, status=code, headers=headers)
