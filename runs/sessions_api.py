"""REST API of sessions and of a subject's erasure (``/api/v1/sessions/``,
``/api/v1/subjects/{subject}/``).

Thin views, as ``runs.api``: parse, call one service or selector of ``runs.control.sessions``,
``runs.control.state``, ``runs.control.erasure`` or ``runs.selectors``, render.
"""

from __future__ import annotations

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
from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from agentops.actors import Actor
from agentops.api import ErrorSerializer, NewestFirstPagination, actor_for
from projects.api import ProjectActionPermissions, access_for, project_for_create
from runs import context_selectors, selectors
from runs.control import erasure, sessions, state
from runs.conversation_api import (
    ConversationEndpoints,
    conversation_schema,
    messages_read_documented,
)
from runs.filters import SessionFilter
from runs.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent, idempotent_action
from runs.models import AgentSession, Compaction
from runs.serializers import (
    EmptySerializer,
)
from runs.session_serializers import (
    ClearedSerializer,
    CreateSessionSerializer,
    ErasureSerializer,
    PoppedItemSerializer,
    SessionItemsAddedSerializer,
    SessionItemsSerializer,
    SessionMessagePageSerializer,
    SessionMessagesQuerySerializer,
    SessionSerializer,
    SessionStateWriteQuerySerializer,
)
from runs.state_api import (
    BAD_INPUT,
    IF_MATCH_PARAMETER,
    STATE_PATCH_REQUEST,
    STATE_WRITE_RESPONSES,
    StateEndpoints,
)
from runs.state_serializers import (
    AgentStateSerializer,
    StateQuerySerializer,
)

_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No session with this id.")
_CLOSED = OpenApiResponse(ErrorSerializer, description="The session is closed.")
_SESSION_STATE = "the session's agent state (the user state its runs share)"


@extend_schema(tags=["sessions"])
@extend_schema_view(
    list=extend_schema(summary="List sessions, newest first (cursor pages)."),
    retrieve=extend_schema(
        summary="One session with the ids of its runs.",
        responses={200: SessionSerializer, 404: _NOT_FOUND},
    ),
    state=extend_schema(
        summary=f"Read {_SESSION_STATE} (current or any past version), with its ETag.",
        parameters=[StateQuerySerializer],
        responses={200: AgentStateSerializer, 400: BAD_INPUT, 404: _NOT_FOUND},
    ),
    **conversation_schema(
        "session", SessionItemsSerializer, SessionItemsAddedSerializer, _NOT_FOUND, _CLOSED
    ),
)
class SessionViewSet(StateEndpoints, ConversationEndpoints, viewsets.GenericViewSet):
    """Sessions: a user's conversation with an agent over many runs. Create, list, read,
    close; their conversation (add items, read the latest, pop, clear), active context and
    compaction; their agent state (as a run's: ``If-Match``, 412, 428).

    Permissions, as for runs: create ``runs.add_run``; read ``runs.view_run``; every other
    write ``runs.drive_run`` (operators, and the client tokens of the project).
    """

    lookup_value_converter = "uuid"
    permission_classes = [ProjectActionPermissions]
    view_permission = "runs.view_run"
    not_found = "session not found"
    action_permissions = {
        "list": ("runs.view_run",),
        "retrieve": ("runs.view_run",),
        "create": ("runs.add_run",),
        "close": ("runs.drive_run",),
        "messages": ("runs.drive_run",),
        "messages_read": ("runs.view_run",),
        "pop": ("runs.drive_run",),
        "clear": ("runs.drive_run",),
        "context": ("runs.view_run",),
        "compact": ("runs.drive_run",),
        "state": ("runs.view_run",),
        "state_put": ("runs.drive_run",),
        "state_patch": ("runs.drive_run",),
    }
    filterset_class = SessionFilter
    pagination_class = NewestFirstPagination
    serializer_class = SessionSerializer
    state_owner = "session"
    state_query = SessionStateWriteQuerySerializer
    messages_input = SessionItemsSerializer
    messages_query = SessionMessagesQuerySerializer
    message_page = SessionMessagePageSerializer

    def get_queryset(self) -> QuerySet[AgentSession]:
        """The sessions of the projects the user may see."""
        return access_for(self.request).scope(
            selectors.session_list(with_run_ids=True), "runs.view_run"
        )

    def project_id_of(self, pk: uuid.UUID) -> int | None:
        """The project of session ``pk`` (None: none), for ``ProjectActionPermissions``."""
        return AgentSession.objects.filter(pk=pk).values_list("project_id", flat=True).first()

    def state_read(self, pk: uuid.UUID, version: int | None) -> selectors.AgentState:
        """Version ``version`` (None: the current) of session ``pk``'s agent state."""
        return selectors.session_state_get(session_id=pk, version=version)

    def state_write(self, pk: uuid.UUID, request: Request, **fields: Any) -> selectors.AgentState:
        """Write session ``pk``'s agent state (``runs.control.state.session_state_write``)."""
        return state.session_state_write(session_id=pk, actor=actor_for(request), **fields)

    messages_read = messages_read_documented(
        summary="The session's latest messages, oldest first (removed ones marked).",
        parameters=[SessionMessagesQuerySerializer],
        responses={200: SessionMessagePageSerializer, 400: BAD_INPUT, 404: _NOT_FOUND},
    )

    def conversation_append(self, pk: uuid.UUID, actor: Actor, **fields: Any) -> dict[str, Any]:
        """Add ``items`` (``runs.control.sessions.session_items_add``), verbatim: how many,
        the first one's position and the session's new totals."""
        added = sessions.session_items_add(actor=actor, session_id=pk, items=fields["items"])
        after = AgentSession.objects.get(pk=pk)
        data = {
            "added": len(added),
            "first_position": added[0].session_position,
            "message_count": after.message_count,
            "context_tokens": after.context_tokens,
        }
        return SessionItemsAddedSerializer(data).data

    def conversation_page(self, pk: uuid.UUID, **query: Any) -> dict[str, Any]:
        """The last ``last`` messages (``runs.context_selectors.session_messages_last``: one indexed
        query) and the session's message count."""
        found = context_selectors.session_messages_last(session_id=pk, last=query["last"])
        count = AgentSession.objects.values_list("message_count", flat=True).get(pk=pk)
        return {"messages": found, "message_count": count}

    def conversation_context(self, pk: uuid.UUID) -> context_selectors.ActiveContext:
        """``runs.context_selectors.session_context``."""
        return context_selectors.session_context(session_id=pk)

    def conversation_compact(self, pk: uuid.UUID, actor: Actor, **fields: Any) -> Compaction:
        """``runs.control.sessions.session_compact``."""
        return sessions.session_compact(actor=actor, session_id=pk, **fields)

    # Declared again only for their schema: a session's state write takes no ``step_index``.
    @extend_schema(
        summary=f"Replace {_SESSION_STATE}, made against the If-Match version.",
        parameters=[IF_MATCH_PARAMETER, SessionStateWriteQuerySerializer],
        request={"application/json": OpenApiTypes.OBJECT},
        responses=STATE_WRITE_RESPONSES,
    )
    def state_put(self, request: Request, pk: uuid.UUID) -> Response:
        """``StateEndpoints.state_put`` on the session's state."""
        return super().state_put(request, pk)

    @extend_schema(
        summary=f"Patch {_SESSION_STATE}, made against the If-Match version.",
        parameters=[IF_MATCH_PARAMETER, SessionStateWriteQuerySerializer],
        request=STATE_PATCH_REQUEST,
        responses=STATE_WRITE_RESPONSES,
    )
    def state_patch(self, request: Request, pk: uuid.UUID) -> Response:
        """``StateEndpoints.state_patch`` on the session's state."""
        return super().state_patch(request, pk)

    def _session(self, pk: uuid.UUID, code: int = status.HTTP_200_OK) -> Response:
        found = selectors.session_list(with_run_ids=True).get(pk=pk)
        return Response(SessionSerializer(found).data, status=code)

    def list(self, request: Request) -> Response:
        """Sessions newest first, filtered (``runs.filters.SessionFilter``: external_id,
        subject, status, project, created_from, created_to); ``?cursor=`` pages."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset())) or []
        return self.get_paginated_response(SessionSerializer(page, many=True).data)

    def retrieve(self, request: Request, pk: uuid.UUID) -> Response:
        """One session (``SessionSerializer``)."""
        return self._session(pk)

    @extend_schema(
        summary="Open a session.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=CreateSessionSerializer,
        responses={
            201: SessionSerializer,
            400: BAD_INPUT,
            409: OpenApiResponse(
                ErrorSerializer, description="The project has a session with this external_id."
            ),
        },
    )
    @idempotent
    def create(self, request: Request) -> Response:
        """Open a session (``runs.control.sessions.session_create``)."""
        body = CreateSessionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = project_for_create(
            access_for(request), fields.pop("project", None), "runs.add_run"
        )
        made = sessions.session_create(actor=actor_for(request), project=project, **fields)
        return self._session(made.pk, status.HTTP_201_CREATED)

    @idempotent_action(
        summary="Close a session: no more runs, messages or state writes.",
        request=EmptySerializer,
        responses={200: SessionSerializer, 400: BAD_INPUT, 404: _NOT_FOUND},
    )
    def close(self, request: Request, pk: uuid.UUID) -> Response:
        """Close (``runs.control.sessions.session_close``); a closed session answers as is."""
        EmptySerializer(data=request.data).is_valid(raise_exception=True)
        sessions.session_close(actor=actor_for(request), session_id=pk)
        return self._session(pk)

    @idempotent_action(
        summary="Take the latest item out of the session's active conversation (kept).",
        request=EmptySerializer,
        responses={200: PoppedItemSerializer, 404: _NOT_FOUND, 409: _CLOSED},
        url_path="messages/pop",
    )
    def pop(self, request: Request, pk: uuid.UUID) -> Response:
        """``runs.control.sessions.session_item_pop``: the Agents SDK's ``pop_item``."""
        EmptySerializer(data=request.data).is_valid(raise_exception=True)
        item = sessions.session_item_pop(actor=actor_for(request), session_id=pk)
        return Response(PoppedItemSerializer({"item": item}).data)

    @idempotent_action(
        summary="Empty the session's active conversation (messages kept, marked removed).",
        request=EmptySerializer,
        responses={200: ClearedSerializer, 404: _NOT_FOUND, 409: _CLOSED},
    )
    def clear(self, request: Request, pk: uuid.UUID) -> Response:
        """``runs.control.sessions.session_clear``: the Agents SDK's ``clear_session``."""
        EmptySerializer(data=request.data).is_valid(raise_exception=True)
        removed = sessions.session_clear(actor=actor_for(request), session_id=pk)
        return Response(ClearedSerializer({"removed": removed}).data)


@extend_schema(tags=["sessions"])
class SubjectViewSet(viewsets.ViewSet):
    """A subject's data: ``DELETE /api/v1/subjects/{subject}/?project=<slug>`` erases it
    (``runs.control.erasure.subject_erase``). Project admins only (``runs.erase_subject``)."""

    permission_classes = [ProjectActionPermissions]
    action_permissions = {"destroy": ("runs.erase_subject",)}
    # Not ``pk``: a subject is no object of one project, so the permission check treats the
    # request as it treats a list, and ``destroy`` checks the project (``project_for_create``).
    lookup_field = "subject"
    lookup_value_converter = "str"

    @extend_schema(
        summary="Erase a subject's sessions, their runs' conversations and state (idempotent).",
        parameters=[
            OpenApiParameter(
                "project",
                OpenApiTypes.STR,
                description="The project's slug. Default: the token's project, or the only "
                "one where you are an admin.",
            )
        ],
        responses={200: ErasureSerializer, 400: BAD_INPUT, 403: ErrorSerializer},
    )
    def destroy(self, request: Request, subject: str) -> Response:
        """Erase ``subject``'s data in the project and answer the counts."""
        project = project_for_create(
            access_for(request), request.query_params.get("project"), "runs.erase_subject"
        )
        done = erasure.subject_erase(actor=actor_for(request), project=project, subject=subject)
        return Response(ErasureSerializer(done).data)
