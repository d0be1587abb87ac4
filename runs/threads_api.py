"""REST API of LangGraph threads (``/api/v1/threads/``): what the SDK's ``AgentOpsSaver``
(a LangGraph ``BaseCheckpointSaver``) calls.

A thread is named by its LangGraph thread id, the ``external_id`` of its session, in the
request's project (``?project=`` or the body's ``project``, a slug; default: the token's
project): a thread of another project is not found, as if it did not exist. Thin views, as
``runs.api``: parse, call one service of ``runs.control.threads`` or the selector of
``runs.thread_selectors``, render.

Permissions, as for sessions: reading ``runs.view_run``; saving checkpoints and copying a
thread (which may open a session) ``runs.add_run`` and ``runs.drive_run``; deleting and
pruning ``runs.drive_run``.
"""

from __future__ import annotations

from collections.abc import Iterable

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentops.api import ErrorSerializer, actor_for
from projects.api import ProjectActionPermissions, access_for, project_id_for_create
from runs.control import thread_retention, threads
from runs.models import AgentSession
from runs.thread_selectors import MAX_PAGE, thread_checkpoints
from runs.thread_serializers import (
    CheckpointPageSerializer,
    CheckpointQuerySerializer,
    CopyThreadSerializer,
    CountSerializer,
    PruneSerializer,
    PutCheckpointSerializer,
    PutWritesSerializer,
    ThreadSerializer,
)

_BAD_INPUT = OpenApiResponse(ErrorSerializer, description="Malformed input; `field` names it.")
_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such source thread.")
_CLOSED = OpenApiResponse(ErrorSerializer, description="The thread's session is closed.")
_SAVE = ("runs.add_run", "runs.drive_run")


def _project(request: Request, slug: str | None, perms: Iterable[str]) -> int:
    """The id of the project the request acts in, where the user holds every one of
    ``perms``."""
    first, *rest = perms
    access = access_for(request)
    project = project_id_for_create(access, slug, first)
    missing = [perm for perm in rest if not access.can(perm, project)]
    if missing:
        raise exceptions.PermissionDenied(
            f"your role in this project does not allow it (needs {', '.join(missing)})"
        )
    return project


@extend_schema(tags=["threads"])
class ThreadViewSet(viewsets.ViewSet):
    """LangGraph threads: their checkpoints, channel values and pending writes."""

    permission_classes = [ProjectActionPermissions]
    action_permissions = {
        "checkpoints": ("runs.view_run",),
        "checkpoint_put": _SAVE,
        "writes": _SAVE,
        "copy": _SAVE,
        "delete_thread": ("runs.drive_run",),
        "prune": ("runs.drive_run",),
    }

    @extend_schema(
        summary="A page of a thread's checkpoints, newest first, with values and writes.",
        parameters=[CheckpointQuerySerializer],
        responses={200: CheckpointPageSerializer, 400: _BAD_INPUT},
    )
    @action(detail=False, methods=["get"])
    def checkpoints(self, request: Request) -> Response:
        """``runs.thread_selectors.thread_checkpoints``; an unknown thread has none."""
        query = CheckpointQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        fields = dict(query.validated_data)
        project = _project(request, fields.pop("project", None), ["runs.view_run"])
        page = thread_checkpoints(
            project_id=project,
            thread_id=fields.pop("thread_id"),
            limit=fields.pop("limit", MAX_PAGE),
            **fields,
        )
        return Response(CheckpointPageSerializer({"checkpoints": page}).data)

    @extend_schema(
        summary="Save a checkpoint (opening the thread's session on its first).",
        request=PutCheckpointSerializer,
        responses={201: CountSerializer, 400: _BAD_INPUT, 409: _CLOSED},
    )
    @checkpoints.mapping.post
    def checkpoint_put(self, request: Request) -> Response:
        """``runs.control.threads.checkpoint_put``."""
        body = PutCheckpointSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = _project(request, fields.pop("project", None), _SAVE)
        threads.checkpoint_put(actor=actor_for(request), project_id=project, **fields)
        return Response({"count": 1}, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Save a task's pending writes after a checkpoint (which may come later).",
        request=PutWritesSerializer,
        responses={201: CountSerializer, 400: _BAD_INPUT, 409: _CLOSED},
    )
    @action(detail=False, methods=["post"])
    def writes(self, request: Request) -> Response:
        """``runs.control.threads.checkpoint_writes_put``."""
        body = PutWritesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = _project(request, fields.pop("project", None), _SAVE)
        count = threads.checkpoint_writes_put(
            actor=actor_for(request), project_id=project, **fields
        )
        return Response({"count": count}, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Delete every checkpoint of a thread (the session stays); idempotent.",
        request=ThreadSerializer,
        responses={200: CountSerializer, 400: _BAD_INPUT},
    )
    # Not named ``delete``: a view's ``delete`` method is its HTTP DELETE handler.
    @action(detail=False, methods=["post"], url_path="delete")
    def delete_thread(self, request: Request) -> Response:
        """``runs.control.thread_retention.thread_delete``."""
        body = ThreadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = _project(request, fields.pop("project", None), ["runs.drive_run"])
        count = thread_retention.thread_delete(
            actor=actor_for(request), project_id=project, **fields
        )
        return Response({"count": count})

    @extend_schema(
        summary="Copy a thread's checkpoints to a new thread (a fork of the whole thread).",
        request=CopyThreadSerializer,
        responses={
            201: CountSerializer,
            400: _BAD_INPUT,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer, description="The target has checkpoints or is closed."
            ),
        },
    )
    @action(detail=False, methods=["post"])
    def copy(self, request: Request) -> Response:
        """``runs.control.thread_retention.thread_copy``."""
        body = CopyThreadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = _project(request, fields.pop("project", None), _SAVE)
        try:
            count = thread_retention.thread_copy(
                actor=actor_for(request), project_id=project, **fields
            )
        except AgentSession.DoesNotExist as exc:
            raise exceptions.NotFound("no such source thread") from exc
        return Response({"count": count}, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Prune threads: keep each namespace's latest checkpoint, or delete all.",
        request=PruneSerializer,
        responses={
            200: CountSerializer,
            400: _BAD_INPUT,
            409: OpenApiResponse(ErrorSerializer, description="A thread uses a DeltaChannel."),
        },
    )
    @action(detail=False, methods=["post"])
    def prune(self, request: Request) -> Response:
        """``runs.control.thread_retention.thread_prune``."""
        body = PruneSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = _project(request, fields.pop("project", None), ["runs.drive_run"])
        count = thread_retention.thread_prune(
            actor=actor_for(request), project_id=project, **fields
        )
        return Response({"count": count})
