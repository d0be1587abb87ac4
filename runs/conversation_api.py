"""The conversation endpoints a run and a session share (``messages/``, ``context/``,
``compact/``): one set of views over a conversation owner that the view names.

Thin views, as ``runs.api``: parse with the owner's serializers, call the owner's service or
selector, render.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentops.actors import Actor
from agentops.api import actor_for
from runs import selectors
from runs.conversation_serializers import (
    CompactionSerializer,
    CompactSerializer,
    ContextSerializer,
)
from runs.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent
from runs.models import Compaction
from runs.state_api import BAD_INPUT


class ConversationEndpoints:
    """``messages/`` (``POST`` appends, ``GET`` reads the latest), ``context/`` and
    ``compact/`` of a run or a session.

    The view gives the serializers of its owner's message bodies (``messages_input``),
    message query (``messages_query``) and message page (``message_page``), and implements
    ``conversation_append``, ``conversation_page``, ``conversation_context`` and
    ``conversation_compact``; its schema (``extend_schema_view``) names what it takes and
    answers.
    """

    messages_input: type[serializers.Serializer]
    messages_query: type[serializers.Serializer]
    message_page: type[serializers.Serializer]

    def conversation_append(self, pk: uuid.UUID, actor: Actor, **fields: Any) -> dict[str, Any]:
        """Append ``fields`` (``messages_input``'s validated data) to ``pk``'s conversation;
        the answer's data (already serialized)."""
        raise NotImplementedError

    def conversation_page(self, pk: uuid.UUID, **query: Any) -> dict[str, Any]:
        """``{"messages", "message_count"}`` of ``pk`` for ``query`` (``messages_query``'s
        validated data)."""
        raise NotImplementedError

    def conversation_context(self, pk: uuid.UUID) -> selectors.ActiveContext:
        """The active context of ``pk``."""
        raise NotImplementedError

    def conversation_compact(self, pk: uuid.UUID, actor: Actor, **fields: Any) -> Compaction:
        """Compact ``pk``'s active context (``CompactSerializer``'s validated data)."""
        raise NotImplementedError

    @extend_schema(parameters=[IDEMPOTENCY_KEY_PARAMETER])
    @action(detail=True, methods=["post"])
    @idempotent
    def messages(self, request: Request, pk: uuid.UUID) -> Response:
        """Append to the conversation (``conversation_append``); answers 201."""
        body = self.messages_input(data=request.data)
        body.is_valid(raise_exception=True)
        data = self.conversation_append(pk, actor_for(request), **body.validated_data)
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="The latest messages, oldest first.")
    @messages.mapping.get
    def messages_read(self, request: Request, pk: uuid.UUID) -> Response:
        """The latest messages, oldest first (``conversation_page``), and the count."""
        query = self.messages_query(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = self.conversation_page(pk, **query.validated_data)
        return Response(self.message_page(page).data)

    @action(detail=True, methods=["get"])
    def context(self, request: Request, pk: uuid.UUID) -> Response:
        """The active context: messages neither removed nor compacted, each active
        compaction's summary in their place, and the tokens in all."""
        return Response(ContextSerializer(self.conversation_context(pk)).data)

    @extend_schema(parameters=[IDEMPOTENCY_KEY_PARAMETER], request=CompactSerializer)
    @action(detail=True, methods=["post"])
    @idempotent
    def compact(self, request: Request, pk: uuid.UUID) -> Response:
        """Replace older messages in the active context by a summary
        (``conversation_compact``): the client's ``summary`` of ``first`` to ``last``, or
        none and the server's summarizer chooses; the messages are kept."""
        body = CompactSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        made = self.conversation_compact(pk, actor_for(request), **body.validated_data)
        return Response(CompactionSerializer(made).data, status=status.HTTP_201_CREATED)


def messages_read_documented(**schema: Any) -> Callable[..., Response]:
    """``ConversationEndpoints.messages_read`` documented for one owner with ``schema``
    (``extend_schema``'s arguments): drf-spectacular reads a mapped ``GET``'s schema from its
    own method, which ``extend_schema_view`` cannot reach."""

    @extend_schema(**schema)
    def messages_read(self: ConversationEndpoints, request: Request, pk: uuid.UUID) -> Response:
        return ConversationEndpoints.messages_read(self, request, pk)

    return messages_read


# The summaries of an owner's append and context endpoints.
_SUMMARIES = {
    "run": (
        "Append a client's model turn (messages and usage) to its run.",
        "The run's active context: what its model is to be sent, with its tokens.",
    ),
    "session": (
        "Add conversation items to the session (between runs).",
        "The session's active context: what its agent's model is to be sent.",
    ),
}


def conversation_schema(
    owner: str,
    body: type[serializers.Serializer],
    appended: type[serializers.Serializer],
    not_found: OpenApiResponse,
    conflict: OpenApiResponse,
) -> dict[str, Any]:
    """``extend_schema_view`` arguments documenting ``messages`` (``POST``), ``context`` and
    ``compact`` for one owner (``run``, ``session``): ``body`` and ``appended`` are the
    serializers of an append's body and answer, ``not_found`` and ``conflict`` the owner's
    404 and 409."""
    append, context = _SUMMARIES[owner]
    refused = {400: BAD_INPUT, 404: not_found, 409: conflict}
    return {
        "messages": extend_schema(
            summary=append, request=body, responses={201: appended, **refused}
        ),
        "context": extend_schema(
            summary=context, responses={200: ContextSerializer, 404: not_found}
        ),
        "compact": extend_schema(
            summary=f"Replace older messages in the {owner}'s active context by a summary.",
            responses={201: CompactionSerializer, **refused},
        ),
    }
