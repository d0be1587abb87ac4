"""REST API of the memory store (``/api/v1/memory/``): put, get and delete an item by
namespace and key, read one by id with its history, search, list namespaces. The operations
of LangGraph's ``BaseStore``, one to one.

Thin views: parse, call one service or selector of ``memory.services`` or
``memory.selectors``, render. Permissions, per project: read ``memory.view_memoryitem``
(every role), put ``memory.change_memoryitem`` and delete ``memory.delete_memoryitem``
(operators, admins and their client tokens). An item of a project the caller may not see
is a 404, as if it did not exist.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentops.api import ErrorSerializer, actor_for
from memory import selectors, services
from memory.models import MemoryItem
from memory.provenance import provenance_of
from memory.serializers import (
    ItemQuerySerializer,
    MemoryItemSerializer,
    MemoryVersionSerializer,
    NamespaceListSerializer,
    NamespacesSerializer,
    PutItemSerializer,
    SearchResultSerializer,
    SearchSerializer,
)
from projects.api import access_for, project_for_create
from projects.models import Project

VIEW = "memory.view_memoryitem"
CHANGE = "memory.change_memoryitem"
DELETE = "memory.delete_memoryitem"
# One entity tag (RFC 9110 §8.8.3): optionally weak (``W/``), then a quoted etagc string.
_ENTITY_TAG = re.compile(r'(W/)?"[\x21\x23-\x7e]*"')
_BAD_INPUT = OpenApiResponse(ErrorSerializer, description="Malformed input; `field` names it.")
_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such item (or it has expired).")
_PRECONDITION = OpenApiResponse(
    ErrorSerializer, description="If-Match is not the item's current version (`version` is)."
)
IF_MATCH = OpenApiParameter(
    "If-Match",
    type=str,
    location=OpenApiParameter.HEADER,
    required=False,
    description='Optional: the item\'s ETag (`"<item id>:<version>"`) this write was made '
    "against, or `*` (any current item); another version answers 412 and writes nothing.",
)


def if_match(request: Request) -> str | None:
    """The request's ``If-Match`` (None: none): ``*`` or one entity tag; a weak tag never
    matches (strong comparison).

    Raises:
        ValidationError: not ``*`` nor one entity tag (400).
    """
    header = request.headers.get("If-Match")
    if header is None:
        return None
    header = header.strip()
    if header != "*" and _ENTITY_TAG.fullmatch(header) is None:
        raise exceptions.ValidationError({"If-Match": ['must be one entity tag, or "*"']})
    return header


def _project(request: Request, slug: str | None, perm: str) -> Project:
    return project_for_create(access_for(request), slug, perm)


def _item_response(item: MemoryItem, code: int = status.HTTP_200_OK) -> Response:
    return Response(MemoryItemSerializer(item).data, status=code, headers={"ETag": item.etag})


class MemoryItemsView(APIView):
    """``/api/v1/memory/items/``: put (PUT), get (GET) and delete (DELETE) one item by
    ``namespace`` and ``key``."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["memory"],
        summary="Create or replace a memory item (LangGraph's put).",
        operation_id="memory_put",
        parameters=[IF_MATCH],
        request=PutItemSerializer,
        responses={
            200: MemoryItemSerializer,
            201: MemoryItemSerializer,
            400: _BAD_INPUT,
            412: _PRECONDITION,
            413: _BAD_INPUT,
        },
    )
    def put(self, request: Request) -> Response:
        """``memory.services.memory_put``: 201 when created, 200 when replaced; the ``ETag``
        header is the new version's."""
        body = PutItemSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = _project(request, fields.pop("project", None), CHANGE)
        provenance = provenance_of(
            project_id=project.pk,
            run_id=fields.pop("run", None),
            step_index=fields.pop("step_index", None),
            session_id=fields.pop("session", None),
            source_message_id=fields.pop("source_message", None),
        )
        written = services.memory_put(
            actor=actor_for(request),
            project=project,
            if_match=if_match(request),
            provenance=provenance,
            **fields,
        )
        code = status.HTTP_201_CREATED if written.created else status.HTTP_200_OK
        return _item_response(written.item, code)

    @extend_schema(
        tags=["memory"],
        summary="Read a memory item by namespace and key (LangGraph's get).",
        operation_id="memory_get",
        parameters=[ItemQuerySerializer],
        responses={200: MemoryItemSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND},
    )
    def get(self, request: Request) -> Response:
        """``memory.selectors.memory_get``; with ``refresh_ttl`` its TTL is renewed."""
        query = ItemQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        fields = query.validated_data
        project = _project(request, fields.get("project"), VIEW)
        item = selectors.memory_get(
            project_id=project.pk, namespace=fields["namespace"], key=fields["key"]
        )
        if fields["refresh_ttl"] and services.memory_refresh_ttl(item_ids=[item.pk]):
            item.refresh_from_db()
        return _item_response(item)

    @extend_schema(
        tags=["memory"],
        summary="Delete a memory item, with a reason kept in its history (LangGraph's delete).",
        operation_id="memory_delete",
        parameters=[IF_MATCH, ItemQuerySerializer],
        responses={204: None, 400: _BAD_INPUT, 412: _PRECONDITION},
    )
    def delete(self, request: Request) -> Response:
        """``memory.services.memory_delete``: 204 whether or not there was a live item (as
        LangGraph's), unless ``If-Match`` names a version that is not current (412)."""
        query = ItemQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        fields = query.validated_data
        project = _project(request, fields.get("project"), DELETE)
        services.memory_delete(
            actor=actor_for(request),
            project=project,
            namespace=fields["namespace"],
            key=fields["key"],
            reason=fields["reason"],
            if_match=if_match(request),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


def _visible_item(request: Request, pk: uuid.UUID) -> MemoryItem:
    """Item ``pk`` if live and in a project where the caller may see memory.

    Raises:
        NotFound: no such item, expired, or of a project the caller may not see.
    """
    item = selectors.live_items().filter(pk=pk).select_related("project").first()
    if item is None or not access_for(request).can(VIEW, item.project_id):
        raise exceptions.NotFound("memory item not found")
    return item


class MemoryItemView(APIView):
    """``/api/v1/memory/items/{id}/``: one live item by id."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["memory"],
        summary="Read a memory item by id.",
        operation_id="memory_item_read",
        responses={200: MemoryItemSerializer, 404: _NOT_FOUND},
    )
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        return _item_response(_visible_item(request, pk))


class MemoryItemHistoryView(APIView):
    """``/api/v1/memory/items/{id}/history/``: every kept version of a live item."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["memory"],
        summary="A memory item's versions, newest first (puts and deletions, with provenance).",
        operation_id="memory_item_history",
        responses={200: MemoryVersionSerializer(many=True), 404: _NOT_FOUND},
    )
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        item = _visible_item(request, pk)
        versions = selectors.memory_item_history(item_id=item.pk)
        return Response(MemoryVersionSerializer(versions, many=True).data)


class MemorySearchView(APIView):
    """``POST /api/v1/memory/search/``: LangGraph's ``search``."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["memory"],
        summary="Search memory items by namespace prefix, value filter and full text, ranked.",
        operation_id="memory_search",
        request=SearchSerializer,
        responses={200: SearchResultSerializer, 400: _BAD_INPUT},
    )
    def post(self, request: Request) -> Response:
        """``memory.selectors.memory_search``; with ``refresh_ttl`` the TTLs of the items
        found are renewed (the page shows them as found)."""
        body = SearchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields: dict[str, Any] = dict(body.validated_data)
        project = _project(request, fields.pop("project", None), VIEW)
        refresh = fields.pop("refresh_ttl")
        found = selectors.memory_search(project_id=project.pk, **fields)
        if refresh and found:
            services.memory_refresh_ttl(item_ids=[hit.item.pk for hit in found])
        more = len(found) == fields["limit"]
        page = {"items": found, "next_offset": fields["offset"] + len(found) if more else None}
        return Response(SearchResultSerializer(page).data)


class MemoryNamespacesView(APIView):
    """``POST /api/v1/memory/namespaces/``: LangGraph's ``list_namespaces``."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["memory"],
        summary="List the namespaces of live memory items (prefix, suffix, max depth).",
        operation_id="memory_namespaces",
        request=NamespacesSerializer,
        responses={200: NamespaceListSerializer, 400: _BAD_INPUT},
    )
    def post(self, request: Request) -> Response:
        body = NamespacesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields: dict[str, Any] = dict(body.validated_data)
        project = _project(request, fields.pop("project", None), VIEW)
        found = selectors.memory_list_namespaces(project_id=project.pk, **fields)
        return Response(NamespaceListSerializer({"namespaces": [list(n) for n in found]}).data)
