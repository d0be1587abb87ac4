"""REST API of runs, their steps and events, and the tool registry (``/api/v1/``).

Thin views: parse the request with a serializer, call one service or selector, render. Domain
errors become status codes in ``agentops.api.exception_handler``.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from typing import Any

from django.db.models import Q, QuerySet
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
from audit.streams import stream_events
from projects.api import ProjectActionPermissions, access_for, project_for_create
from projects.models import Project
from runs import context_selectors, selectors
from runs.control import (
    compaction,
    conversation,
    create,
    fork,
    lifecycle,
    settle,
    state,
    state_schemas,
)
from runs.executor import client
from runs.filters import RunFilter
from runs.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent
from runs.models import AgentSession, Run, StateSchema, state_etag
from runs.serializers import (
    AgentStateSerializer,
    AppendStepSerializer,
    CancelRunSerializer,
    CompactionSerializer,
    CompactSerializer,
    ContextSerializer,
    CreateRunSerializer,
    CreateStateSchemaSerializer,
    EmptySerializer,
    EventPageSerializer,
    EventQuerySerializer,
    ForkRunSerializer,
    MessagePageSerializer,
    MessagesInputSerializer,
    MessagesQuerySerializer,
    RunListSerializer,
    RunSerializer,
    RunTotalsSerializer,
    SettleStepSerializer,
    StateQuerySerializer,
    StateSchemaQuerySerializer,
    StateSchemaSerializer,
    StateWriteQuerySerializer,
    StepReportSerializer,
    StepSerializer,
    ToolSerializer,
)
from runs.tools import all_tools

_BAD_INPUT = OpenApiResponse(ErrorSerializer, description="Malformed input; `field` names it.")
_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No run with this id.")
_CONFLICT = OpenApiResponse(
    ErrorSerializer, description="The run's current status forbids this now."
)
STATE_WRITE_RESPONSES = {
    200: AgentStateSerializer,
    400: _BAD_INPUT,
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
            400: _BAD_INPUT,
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


@extend_schema(tags=["runs"])
@extend_schema_view(
    list=extend_schema(summary="List runs, newest first (cursor pages)."),
    retrieve=extend_schema(
        summary="One run with its conversation and every step.",
        responses={200: RunSerializer, 404: _NOT_FOUND},
    ),
)
class RunViewSet(StateEndpoints, viewsets.GenericViewSet):
    """Runs: create, list, read, drive (client runs), cancel, resume, and their audit events.

    Every POST accepts an ``Idempotency-Key`` header (``runs.idempotency``); a write of the
    agent's state (PUT, PATCH ``state/``) needs ``If-Match`` instead.
    Permissions: create and fork ``runs.add_run``; read (the agent's state too)
    ``runs.view_run``; append steps, report client steps' results, append messages, compact,
    write the agent's state and complete ``runs.drive_run``; cancel ``runs.cancel_run``;
    resume and settle an unknown outcome ``runs.resume_run``.
    """

    lookup_value_converter = "uuid"
    permission_classes = [ProjectActionPermissions]
    view_permission = "runs.view_run"
    not_found = "run not found"
    action_permissions = {
        "list": ("runs.view_run",),
        "retrieve": ("runs.view_run",),
        "events": ("runs.view_run",),
        "create": ("runs.add_run",),
        "steps": ("runs.drive_run",),
        "step": ("runs.view_run",),
        "step_result": ("runs.drive_run",),
        "messages": ("runs.drive_run",),
        "messages_read": ("runs.view_run",),
        "context": ("runs.view_run",),
        "compact": ("runs.drive_run",),
        "complete": ("runs.drive_run",),
        "cancel": ("runs.cancel_run",),
        "step_settle": ("runs.resume_run",),
        "resume": ("runs.resume_run",),
        "fork": ("runs.add_run",),
        "state": ("runs.view_run",),
        "state_put": ("runs.drive_run",),
        "state_patch": ("runs.drive_run",),
    }
    filterset_class = RunFilter
    pagination_class = NewestFirstPagination
    serializer_class = RunSerializer

    def get_queryset(self) -> QuerySet[Run]:
        """The runs of the projects the user may see, requester joined (step summaries: see
        ``list``)."""
        return access_for(self.request).scope(selectors.run_list(), "runs.view_run")

    def project_id_of(self, pk: uuid.UUID) -> int | None:
        """The project of the run ``pk`` (None: no such run), for ``ProjectActionPermissions``."""
        return Run.objects.filter(pk=pk).values_list("project_id", flat=True).first()

    def state_read(self, pk: uuid.UUID, version: int | None) -> selectors.AgentState:
        """Version ``version`` of run ``pk``'s agent state as written (None: the current one,
        upgraded to the newest version of the run's state schema)."""
        if version is None:
            return selectors.agent_state_read(run_id=pk)
        return selectors.agent_state_get(run_id=pk, version=version)

    def state_write(self, pk: uuid.UUID, request: Request, **fields: Any) -> selectors.AgentState:
        """Write run ``pk``'s agent state (``runs.control.state.run_state_write``)."""
        return state.run_state_write(run_id=pk, actor=actor_for(request), **fields)

    def get_serializer_class(self) -> type[RunSerializer | RunListSerializer]:
        return RunListSerializer if self.action == "list" else RunSerializer

    @staticmethod
    def _session_of(project: Project, name: str) -> AgentSession:
        """The session of ``project`` whose id or external id is ``name``.

        Raises:
            NotFound: none (another project's session is none).
        """
        named = Q(external_id=name)
        with contextlib.suppress(ValueError):
            named |= Q(pk=uuid.UUID(name))
        found = AgentSession.objects.filter(named, project=project).order_by("-created_at")
        session = found.first()
        if session is None:
            raise exceptions.NotFound("session not found")
        return session

    def _run_response(self, run_id: uuid.UUID, code: int = status.HTTP_200_OK) -> Response:
        return Response(RunSerializer(selectors.run_get(run_id=run_id)).data, status=code)

    def list(self, request: Request) -> Response:
        """Runs newest first, filtered (``runs.filters.RunFilter``: status, agent, project,
        goal, tool, requester, created_from, created_to); ``?cursor=`` pages."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset())) or []
        summaries = selectors.step_summaries(run_ids=[run.pk for run in page])
        data = RunListSerializer(page, many=True, context={"step_summaries": summaries}).data
        return self.get_paginated_response(data)

    def retrieve(self, request: Request, pk: uuid.UUID) -> Response:
        """One run with its conversation, state and every step (approval, attempts)."""
        return self._run_response(pk)

    @extend_schema(
        summary="Create a run; it starts after the request commits.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=CreateRunSerializer,
        responses={
            201: RunSerializer,
            400: _BAD_INPUT,
            404: OpenApiResponse(
                ErrorSerializer, description="No session with this id or external_id here."
            ),
        },
    )
    @idempotent
    def create(self, request: Request) -> Response:
        """Create a run (``runs.control.create.run_create``) and answer 201 with it as it was
        created (queued), not read back: the workers may already have moved it on."""
        body = CreateRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = project_for_create(
            access_for(request), fields.pop("project", None), "runs.add_run"
        )
        if "session" in fields:
            fields["session"] = self._session_of(project, fields["session"])
        run = create.run_create(actor=actor_for(request), project=project, **fields)
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Append a step to a client run.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=AppendStepSerializer,
        responses={201: StepSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def steps(self, request: Request, pk: uuid.UUID) -> Response:
        """Append one step (``runs.control.create.step_append``); it runs after the steps
        before it (a client step becomes ``ready`` for its client)."""
        body = AppendStepSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        step = create.step_append(actor=actor_for(request), run_id=pk, **body.validated_data)
        step = selectors.steps_with_details().get(pk=step.pk)
        return Response(StepSerializer(step).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="One step of a run, as it is now.",
        responses={200: StepSerializer, 404: _NOT_FOUND},
    )
    @action(detail=True, methods=["get"], url_path="steps/<int:step_id>")
    def step(self, request: Request, pk: uuid.UUID, step_id: int) -> Response:
        """The step ``step_id`` of the run: a client that crashed reads here whether its
        client step's outcome is on record (``succeeded``) or still to report (``ready``)."""
        step = selectors.steps_with_details().get(pk=step_id, run_id=pk)
        return Response(StepSerializer(step).data)

    @extend_schema(
        summary="Report the outcome of a client step (a tool the client ran itself).",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=StepReportSerializer,
        responses={200: StepSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"], url_path="steps/<int:step_id>/result")
    @idempotent
    def step_result(self, request: Request, pk: uuid.UUID, step_id: int) -> Response:
        """Record ``{"result"}``, ``{"error"}`` or ``{"outcome": "unknown"}`` for a ready client
        step (``runs.executor.client.step_report``); the same report again answers the step
        as it is, a different one for a settled step is a 409."""
        body = StepReportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        step = client.step_report(
            actor=actor_for(request),
            run_id=pk,
            step_id=step_id,
            report=dict(request.data),
        )
        step = selectors.steps_with_details().get(pk=step.pk)
        return Response(StepSerializer(step).data)

    @extend_schema(
        summary="Settle a step whose outcome is unknown: its call happened (with its result) "
        "or did not (it runs again).",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=SettleStepSerializer,
        responses={200: RunSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"], url_path="steps/<int:step_id>/settle")
    @idempotent
    def step_settle(self, request: Request, pk: uuid.UUID, step_id: int) -> Response:
        """``runs.control.settle.step_settle``: an operator who checked the other side says
        whether the call took effect; the run goes on either way."""
        body = SettleStepSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = settle.step_settle(
            run_id=pk, step_id=step_id, actor=actor_for(request), **body.validated_data
        )
        return self._run_response(run.pk)

    @extend_schema(
        summary="Append a client's model turn (messages and usage) to its run.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=MessagesInputSerializer,
        responses={201: RunTotalsSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def messages(self, request: Request, pk: uuid.UUID) -> Response:
        """Append messages and a model call's usage
        (``runs.control.conversation.run_messages_append``); answers the run's status and new
        totals (without its steps and conversation: a turn is frequent, the run grows)."""
        body = MessagesInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = conversation.run_messages_append(
            actor=actor_for(request), run_id=pk, **body.validated_data
        )
        # Read again: the row as committed (a protected status cannot be refreshed in place).
        totals = Run.objects.select_related("requested_by").get(pk=run.pk)
        return Response(RunTotalsSerializer(totals).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="The run's latest messages, oldest first (page back with before).",
        parameters=[MessagesQuerySerializer],
        responses={200: MessagePageSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND},
    )
    @messages.mapping.get
    def messages_read(self, request: Request, pk: uuid.UUID) -> Response:
        """The last ``last`` messages (``runs.selectors.messages_before``: one indexed
        query), of those before position ``before`` when given, and the run's message count."""
        query = MessagesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        count = Run.objects.values_list("message_count", flat=True).get(pk=pk)
        before = query.validated_data["before"]
        end = count if before is None else min(before, count)
        found = selectors.messages_before(run_id=pk, end=end, last=query.validated_data["last"])
        page = {"messages": found, "message_count": count}
        return Response(MessagePageSerializer(page).data)

    @extend_schema(
        summary="The run's active context: what its model is to be sent, with its tokens.",
        responses={200: ContextSerializer, 404: _NOT_FOUND},
    )
    @action(detail=True, methods=["get"])
    def context(self, request: Request, pk: uuid.UUID) -> Response:
        """The active context (``runs.context_selectors.active_context``): messages no compaction
        replaced, each active compaction's summary in their place, and the tokens in all."""
        return Response(ContextSerializer(context_selectors.active_context(run_id=pk)).data)

    @extend_schema(
        summary="Replace older messages in the run's active context by a summary.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=CompactSerializer,
        responses={201: CompactionSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def compact(self, request: Request, pk: uuid.UUID) -> Response:
        """Compact (``runs.control.compaction.run_compact``): the client's ``summary`` of
        messages ``first`` to ``last``, or none and the server's summarizer chooses; the
        messages are kept."""
        body = CompactSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        made = compaction.run_compact(actor=actor_for(request), run_id=pk, **body.validated_data)
        return Response(CompactionSerializer(made).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="A client run appends no more steps; it succeeds once they are done.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=EmptySerializer,
        responses={200: RunSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def complete(self, request: Request, pk: uuid.UUID) -> Response:
        """Mark a client run complete (``runs.control.lifecycle.run_complete``)."""
        EmptySerializer(data=request.data).is_valid(raise_exception=True)
        run = lifecycle.run_complete(run_id=pk, actor=actor_for(request))
        return self._run_response(run.pk)

    @extend_schema(
        summary="Cancel a run and every open step and approval.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=CancelRunSerializer,
        responses={200: RunSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def cancel(self, request: Request, pk: uuid.UUID) -> Response:
        """Cancel the run (``runs.control.lifecycle.run_cancel``) with an optional ``reason``."""
        body = CancelRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = lifecycle.run_cancel(
            run_id=pk, actor=actor_for(request), reason=body.validated_data["reason"]
        )
        return self._run_response(run.pk)

    @extend_schema(
        summary="Resume a failed run from its failed step.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=EmptySerializer,
        responses={200: RunSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def resume(self, request: Request, pk: uuid.UUID) -> Response:
        """Resume a failed run (``runs.control.lifecycle.run_resume``)."""
        EmptySerializer(data=request.data).is_valid(raise_exception=True)
        run = lifecycle.run_resume(run_id=pk, actor=actor_for(request))
        return self._run_response(run.pk)

    @extend_schema(
        summary="Fork a new run from the checkpoint before a step.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=ForkRunSerializer,
        responses={201: RunSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def fork(self, request: Request, pk: uuid.UUID) -> Response:
        """Fork (``runs.control.fork.run_fork``): steps before ``from_index`` are reused, not
        re-run; ``args`` optionally replaces the arguments of the step at ``from_index``."""
        body = ForkRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = fork.run_fork(run_id=pk, actor=actor_for(request), **body.validated_data)
        return self._run_response(run.pk, status.HTTP_201_CREATED)

    @extend_schema(
        summary="The run's audit events in id order, after a given event id.",
        parameters=[EventQuerySerializer],
        responses={200: EventPageSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND},
    )
    @action(detail=True, methods=["get"])
    def events(self, request: Request, pk: uuid.UUID) -> Response:
        """Up to ``limit`` events with id > ``after``; ``next_after`` is the last id returned
        (or ``after`` when none), to pass as the next ``after``. A run's events commit in id
        order (``audit.streams``), so paging by ``next_after`` never skips one."""
        query = EventQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        after, limit = query.validated_data["after"], query.validated_data["limit"]
        events = list(stream_events(run_id=pk, after=after)[:limit])
        next_after = events[-1].pk if events else after
        return Response(EventPageSerializer({"events": events, "next_after": next_after}).data)


@extend_schema(tags=["tools"])
class ToolViewSet(viewsets.ViewSet):
    """The registered tools a step may name; any signed-in user may list them."""

    permission_classes = [ProjectActionPermissions]
    action_permissions = {"list": ()}

    @extend_schema(summary="Registered tools.", responses={200: ToolSerializer(many=True)})
    def list(self, request: Request) -> Response:
        """Every registered tool, sorted by name, with its argument schema and risk."""
        return Response(ToolSerializer(all_tools(), many=True).data)


@extend_schema(tags=["state-schemas"])
@extend_schema_view(
    list=extend_schema(
        summary="State schemas of the projects you may see, newest first (cursor pages).",
        parameters=[StateSchemaQuerySerializer],
    ),
    retrieve=extend_schema(
        summary="One version of a state schema.",
        responses={200: StateSchemaSerializer, 404: _NOT_FOUND},
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
            400: _BAD_INPUT,
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
