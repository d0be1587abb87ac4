"""REST API of agent states and their schemas: the ``state/`` endpoints a run and a session
share (``StateEndpoints``) and the state schemas' versions (``/api/v1/state-schemas/``).

Thin views, as ``runs.api``: parse, call one service or selector, render.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentops.api import ErrorSerializer, NewestFirstPagination, PreconditionRequired, actor_for
from agentops.errors import PreconditionFailed
from agentops.parsers import JsonPatchParser, MergePatchParser, StrictJSONParser
from projects.api import ProjectActionPermissions, access_for, project_for_create
from runs import selectors
from runs.control import state, state_schemas
from runs.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent
from runs.models import StateSchema, state_etag
from runs.state_serializers import (
    AgentStateSerializer,
    CreateStateSchemaSerializer,
    StateQuerySerializer,
    StateSchemaQuerySerializer,
    StateSchemaSerializer,
    StateWriteQuerySerializer,
)

BAD_INPUT = OpenApiResponse(ErrorSerializer, description="Malformed input; `field` names it.")
_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No run with this id.")
STATE_WRITE_RESPONSES = {
    200: AgentStateSerializer,
    400: BAD_INPUT,
    404: _NOT_FOUND,
    409: OpenApiResponse(
        ErrorSerializer,
        description="The run is finished, or the JSON Patch does not apply to the state.",
    ),
    412: OpenApiResponse(
        ErrorSerializer,
        description="If-Match is not the current version (`version`, and `ETag`, name it).",
    ),
    413: OpenApiResponse(ErrorSerializer, description="The new state is over the size limit."),
    415: OpenApiResponse(ErrorSerializer, description="Not a media type this method takes."),
    428: OpenApiResponse(ErrorSerializer, description="If-Match is missing or `*`."),
}
IF_MATCH_PARAMETER = OpenApiParameter(
    "If-Match",
    type=str,
    location=OpenApiParameter.HEADER,
    required=True,
    description="The ETag of the state version this write was made against (from a read "
    'or the last write), one strong entity tag: `"<run id>:<version>"`.',
)
# One entity tag (RFC 9110 §8.8.3): optionally weak (``W/``), then a quoted etagc string.
_ENTITY_TAG = re.compile(r'(W/)?"([\x21\x23-\x7e]*)"')
_MERGE_PATCH = MergePatchParser.media_type
_JSON_PATCH = JsonPatchParser.media_type
# The bodies a state PATCH takes: a JSON Merge Patch (RFC 7396) or a JSON Patch (RFC 6902).
STATE_PATCH_REQUEST = {
    _MERGE_PATCH: OpenApiTypes.OBJECT,
    _JSON_PATCH: {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "op": {
                    "type": "string",
                    "enum": ["add", "remove", "replace", "move", "copy", "test"],
                },
                "path": {"type": "string"},
                "from": {"type": "string"},
                "value": {},
            },
            "required": ["op", "path"],
        },
    },
}


class StateEndpoints:
    """``state/`` of a run or a session (``GET``, ``PUT``, ``PATCH``): the agent's state,
    versioned, each write made against the ``If-Match`` version (RFC 9110 §13.1.1).

    The view names what it serves with ``state_owner`` (``run``, ``session``) and implements
    ``state_read`` and ``state_write``; ``state_query`` checks a write's query."""

    state_owner = "run"
    state_query: type[serializers.Serializer] = StateWriteQuerySerializer

    def state_read(self, pk: uuid.UUID, version: int | None) -> selectors.AgentState:
        raise NotImplementedError

    def state_write(self, pk: uuid.UUID, request: Request, **fields: Any) -> selectors.AgentState:
        raise NotImplementedError

    def _state_response(self, owner_id: uuid.UUID, found: selectors.AgentState) -> Response:
        headers = {"ETag": state_etag(owner_id, found.version)}
        if found.upgraded_from is not None:
            headers["Agentops-State-Upgraded"] = f"{found.upgraded_from} -> {found.schema_version}"
        return Response(AgentStateSerializer(found).data, headers=headers)

    def _base_version(self, request: Request, owner_id: uuid.UUID) -> int:
        """The state version named by the request's ``If-Match`` (RFC 9110 §13.1.1): one strong
        entity tag of this run's (or session's) state. ``*`` is refused like a missing header
        (it would match any version: a lost update); a weak tag, or one of another run or
        session, never matches (strong comparison), so it answers 412 with the current
        version.

        Raises:
            PreconditionRequired: no ``If-Match``, or ``*`` (428).
            ValidationError: not one entity tag (400).
            PreconditionFailed: a tag that names no version of this run's state (412).
        """
        header = request.headers.get("If-Match")
        if header is None or header.strip() == "*":
            raise PreconditionRequired()
        tag = _ENTITY_TAG.fullmatch(header.strip())
        if tag is None:
            raise exceptions.ValidationError(
                {"If-Match": ['must be one entity tag, e.g. "<run id>:<version>"']}
            )
        named = re.fullmatch(rf"{re.escape(str(owner_id))}:(0|[1-9][0-9]{{0,9}})", tag.group(2))
        if tag.group(1) is None and named is not None:
            return int(named.group(1))
        current = self.state_read(owner_id, None).version
        raise PreconditionFailed(
            f"If-Match {header.strip()} names no version of this {self.state_owner}'s state; "
            f"the current version is {current}",
            version=current,
            etag=state_etag(owner_id, current),
        )

    def _state_write(self, request: Request, pk: uuid.UUID, operation: state.Operation) -> Response:
        query = self.state_query(data=request.query_params)
        query.is_valid(raise_exception=True)
        if not request.body:
            raise exceptions.ValidationError({"body": ["a body is required"]})
        # Malformed content is a 400 whatever the If-Match (parsed first).
        document = request.data
        written = self.state_write(
            pk,
            request,
            base_version=self._base_version(request, pk),
            operation=operation,
            document=document,
            **query.validated_data,
        )
        return self._state_response(pk, written)

    @extend_schema(
        summary="The agent's own state of a run (current or any past version), with its ETag.",
        parameters=[StateQuerySerializer],
        responses={
            200: AgentStateSerializer,
            400: BAD_INPUT,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer,
                description="The current state cannot be upgraded to the newest version of "
                "the run's state schema (the message says where and why).",
            ),
        },
    )
    @action(
        detail=True,
        methods=["get"],
        parser_classes=[StrictJSONParser, MergePatchParser, JsonPatchParser],
    )
    def state(self, request: Request, pk: uuid.UUID) -> Response:
        """Version ``?version=`` of the agent's state (default: the current one):
        ``{"version", "state", "schema_version", "upgraded_from"}``, its ``ETag`` to send as
        ``If-Match`` with the next write. Version 0 is the state the run (or session) started
        with.

        The current state of a run whose state schema has a newer version than the one it was
        stored under is shown upgraded (``runs.selectors.agent_state_read``, nothing written):
        ``upgraded_from`` and the header ``Agentops-State-Upgraded: <old> -> <new>`` say so.
        A version named by ``?version=`` is shown as it was written."""
        query = StateQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = self.state_read(pk, query.validated_data.get("version"))
        return self._state_response(pk, found)

    @extend_schema(
        summary="Replace the agent's state (a new version), made against the If-Match version.",
        parameters=[IF_MATCH_PARAMETER, StateWriteQuerySerializer],
        request={"application/json": OpenApiTypes.OBJECT},
        responses=STATE_WRITE_RESPONSES,
    )
    @state.mapping.put
    def state_put(self, request: Request, pk: uuid.UUID) -> Response:
        """The body (``application/json``) is the whole new state, a JSON object
        (``runs.control.state.run_state_write``, ``session_state_write``)."""
        if request.content_type.split(";")[0].strip().lower() != "application/json":
            raise exceptions.UnsupportedMediaType(request.content_type)
        return self._state_write(request, pk, "put")

    @extend_schema(
        summary="Patch the agent's state (a new version), made against the If-Match version.",
        parameters=[IF_MATCH_PARAMETER, StateWriteQuerySerializer],
        request=STATE_PATCH_REQUEST,
        responses=STATE_WRITE_RESPONSES,
    )
    @state.mapping.patch
    def state_patch(self, request: Request, pk: uuid.UUID) -> Response:
        """The body is a JSON Merge Patch (RFC 7396, ``application/merge-patch+json``) or a
        JSON Patch (RFC 6902, ``application/json-patch+json``) of the state
        (``runs.control.state.run_state_write``, ``session_state_write``)."""
        media_type = request.content_type.split(";")[0].strip().lower()
        operations: dict[str, state.Operation] = {
            _MERGE_PATCH: "merge_patch",
            _JSON_PATCH: "json_patch",
        }
        if media_type not in operations:
            raise exceptions.UnsupportedMediaType(request.content_type)
        return self._state_write(request, pk, operations[media_type])


_SCHEMA_NOT_FOUND = OpenApiResponse(
    ErrorSerializer, description="No state schema version with this id."
)


@extend_schema(tags=["state-schemas"])
@extend_schema_view(
    list=extend_schema(
        summary="State schemas of the projects you may see, newest first (cursor pages).",
        parameters=[StateSchemaQuerySerializer],
    ),
    retrieve=extend_schema(
        summary="One version of a state schema.",
        responses={200: StateSchemaSerializer, 404: _SCHEMA_NOT_FOUND},
    ),
)
class StateSchemaViewSet(viewsets.GenericViewSet):
    """Versions of the projects' JSON Schemas for agent states (``runs.models.StateSchema``).

    Permissions: list and read ``runs.view_run`` (in the schema's project); register
    ``runs.add_stateschema`` (project admins). Versions are never changed or deleted.
    """

    lookup_value_converter = "int"
    permission_classes = [ProjectActionPermissions]
    view_permission = "runs.view_run"
    not_found = "state schema not found"
    action_permissions = {
        "list": ("runs.view_run",),
        "retrieve": ("runs.view_run",),
        "create": ("runs.add_stateschema",),
    }
    pagination_class = NewestFirstPagination
    serializer_class = StateSchemaSerializer

    def get_queryset(self) -> QuerySet[StateSchema]:
        """The versions of the projects the user may see runs of, project joined."""
        rows = StateSchema.objects.select_related("project")
        return access_for(self.request).scope(rows, "runs.view_run")

    def project_id_of(self, pk: int) -> int | None:
        """The project of schema version ``pk`` (None: none), for ``ProjectActionPermissions``."""
        return StateSchema.objects.filter(pk=pk).values_list("project_id", flat=True).first()

    def list(self, request: Request) -> Response:
        """Versions newest first, only schema ``?name=`` when given; ``?cursor=`` pages."""
        query = StateSchemaQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = self.get_queryset()
        if "name" in query.validated_data:
            rows = rows.filter(name=query.validated_data["name"])
        page = self.paginate_queryset(rows) or []
        return self.get_paginated_response(StateSchemaSerializer(page, many=True).data)

    def retrieve(self, request: Request, pk: int) -> Response:
        """One version with its schema and migration."""
        return Response(StateSchemaSerializer(self.get_queryset().get(pk=pk)).data)

    @extend_schema(
        summary="Register the next version of a state schema.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=CreateStateSchemaSerializer,
        responses={
            201: StateSchemaSerializer,
            400: BAD_INPUT,
            409: OpenApiResponse(ErrorSerializer, description="The version was taken meanwhile."),
        },
    )
    @idempotent
    def create(self, request: Request) -> Response:
        """Register a version (``runs.control.state_schemas.state_schema_create``): a schema
        that may not be used (remote ``$ref``, a pattern outside RE2, a loop), a version
        that is not the next or a missing or unknown migration is a 400 naming the field."""
        body = CreateStateSchemaSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = project_for_create(
            access_for(request), fields.pop("project", None), "runs.add_stateschema"
        )
        created = state_schemas.state_schema_create(
            actor=actor_for(request), project=project, **fields
        )
        return Response(StateSchemaSerializer(created).data, status=status.HTTP_201_CREATED)
