"""REST API of runs, their steps and events, and the tool registry (``/api/v1/``).

Thin views: parse the request with a serializer, call one service or selector, render. Domain
errors become status codes in ``agentops.api.exception_handler``.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentops.actors import Actor
from agentops.api import ErrorSerializer, NewestFirstPagination, actor_for
from audit.streams import stream_events
from projects.api import ProjectActionPermissions, access_for, project_for_create
from projects.models import Project
from runs import context_selectors, selectors
from runs.control import (
    compaction,
    compensation,
    conversation,
    create,
    fork,
    lifecycle,
    settle,
    state,
)
from runs.conversation_api import (
    ConversationEndpoints,
    conversation_schema,
    messages_read_documented,
)
from runs.conversation_serializers import (
    MessagePageSerializer,
    MessagesInputSerializer,
    MessagesQuerySerializer,
)
from runs.executor import client
from runs.filters import RunFilter
from runs.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent, idempotent_action
from runs.identity_serializers import identity_fields
from runs.models import AgentSession, Compaction, Run
from runs.serializers import (
    AppendStepSerializer,
    CancelRunSerializer,
    CreateRunSerializer,
    EmptySerializer,
    EventPageSerializer,
    EventQuerySerializer,
    ForkRunSerializer,
    RunListSerializer,
    RunSerializer,
    RunTotalsSerializer,
    SettleStepSerializer,
    StepReportSerializer,
    StepSerializer,
    ToolSerializer,
)
from runs.state_api import BAD_INPUT, StateEndpoints
from runs.tools import all_tools

_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No run with this id.")
_CONFLICT = OpenApiResponse(
    ErrorSerializer, description="The run's current status forbids this now."
)


@extend_schema(tags=["runs"])
@extend_schema_view(
    list=extend_schema(summary="List runs, newest first (cursor pages)."),
    retrieve=extend_schema(
        summary="One run with its conversation and every step.",
        responses={200: RunSerializer, 404: _NOT_FOUND},
    ),
    **conversation_schema(
        "run", MessagesInputSerializer, RunTotalsSerializer, _NOT_FOUND, _CONFLICT
    ),
)
class RunViewSet(StateEndpoints, ConversationEndpoints, viewsets.GenericViewSet):
    """Runs: create, list, read, drive (client runs), cancel, resume, compensate, and their
    audit events.

    Every POST accepts an ``Idempotency-Key`` header (``runs.idempotency``); a write of the
    agent's state (PUT, PATCH ``state/``) needs ``If-Match`` instead.
    Permissions: create and fork ``runs.add_run``; read (the agent's state too)
    ``runs.view_run``; append steps, report client steps' results, append messages, compact,
    write the agent's state and complete ``runs.drive_run``; cancel ``runs.cancel_run``;
    resume, compensate and settle an unknown outcome ``runs.resume_run``.
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
        "compensate": ("runs.resume_run",),
        "fork": ("runs.add_run",),
        "state": ("runs.view_run",),
        "state_put": ("runs.drive_run",),
        "state_patch": ("runs.drive_run",),
    }
    filterset_class = RunFilter
    pagination_class = NewestFirstPagination
    serializer_class = RunSerializer
    messages_input = MessagesInputSerializer
    messages_query = MessagesQuerySerializer
    message_page = MessagePageSerializer

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

    messages_read = messages_read_documented(
        summary="The run's latest messages, oldest first (page back with before).",
        parameters=[MessagesQuerySerializer],
        responses={200: MessagePageSerializer, 400: BAD_INPUT, 404: _NOT_FOUND},
    )

    def conversation_append(self, pk: uuid.UUID, actor: Actor, **fields: Any) -> dict[str, Any]:
        """Append a model turn (``runs.control.conversation.run_messages_append``): the run's
        status and new totals (without its steps and conversation: a turn is frequent, the
        run grows)."""
        identity = identity_fields(fields)
        run = conversation.run_messages_append(actor=actor, run_id=pk, identity=identity, **fields)
        # Read again: the row as committed (a protected status cannot be refreshed in place).
        totals = Run.objects.select_related("requested_by", "prompt").get(pk=run.pk)
        return RunTotalsSerializer(totals).data

    def conversation_page(self, pk: uuid.UUID, **query: Any) -> dict[str, Any]:
        """The last ``last`` messages (``runs.selectors.messages_before``: one indexed query),
        of those before position ``before`` when given, and the run's message count."""
        count = Run.objects.values_list("message_count", flat=True).get(pk=pk)
        before = query["before"]
        end = count if before is None else min(before, count)
        found = selectors.messages_before(run_id=pk, end=end, last=query["last"])
        return {"messages": found, "message_count": count}

    def conversation_context(self, pk: uuid.UUID) -> context_selectors.ActiveContext:
        """``runs.context_selectors.active_context``."""
        return context_selectors.active_context(run_id=pk)

    def conversation_compact(self, pk: uuid.UUID, actor: Actor, **fields: Any) -> Compaction:
        """``runs.control.compaction.run_compact``."""
        return compaction.run_compact(actor=actor, run_id=pk, **fields)

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
            400: BAD_INPUT,
            404: OpenApiResponse(
                ErrorSerializer, description="No session with this id or external_id here."
            ),
        },
    )
    @idempotent
    def create(self, request: Request) -> Response:
        """Create a run (``runs.control.create.run_create``; a ``traceparent`` header makes
        its trace continue the client's) and answer 201 with it as it was created (queued),
        not read back: the workers may already have moved it on."""
        body = CreateRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        project = project_for_create(
            access_for(request), fields.pop("project", None), "runs.add_run"
        )
        if "session" in fields:
            fields["session"] = self._session_of(project, fields["session"])
        identity = identity_fields(fields)
        run = create.run_create(
            actor=actor_for(request),
            project=project,
            identity=identity,
            traceparent=request.headers.get("traceparent"),
            token_grant=getattr(request.auth, "grant", None),
            **fields,
        )
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @idempotent_action(
        summary="Append a step to a client run.",
        request=AppendStepSerializer,
        responses={201: StepSerializer, 400: BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    def steps(self, request: Request, pk: uuid.UUID) -> Response:
        """Append one step (``runs.control.create.step_append``; a ``traceparent`` header puts
        its span below the client's); it runs after the steps before it (a client step
        becomes ``ready`` for its client)."""
        body = AppendStepSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        step = create.step_append(
            actor=actor_for(request),
            run_id=pk,
            traceparent=request.headers.get("traceparent"),
            **body.validated_data,
        )
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

    @idempotent_action(
        summary="Report the outcome of a client step (a tool the client ran itself).",
        request=StepReportSerializer,
        responses={200: StepSerializer, 400: BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
        url_path="steps/<int:step_id>/result",
    )
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

    @idempotent_action(
        summary="Settle a step whose outcome is unknown: its call happened (with its result) "
        "or did not (it runs again).",
        request=SettleStepSerializer,
        responses={200: RunSerializer, 400: BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
        url_path="steps/<int:step_id>/settle",
    )
    def step_settle(self, request: Request, pk: uuid.UUID, step_id: int) -> Response:
        """``runs.control.settle.step_settle``: an operator who checked the other side says
        whether the call took effect; the run goes on either way."""
        body = SettleStepSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = settle.step_settle(
            run_id=pk, step_id=step_id, actor=actor_for(request), **body.validated_data
        )
        return self._run_response(run.pk)

    @idempotent_action(
        summary="A client run appends no more steps; it succeeds once they are done.",
        request=EmptySerializer,
        responses={200: RunSerializer, 400: BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    def complete(self, request: Request, pk: uuid.UUID) -> Response:
        """Mark a client run complete (``runs.control.lifecycle.run_complete``)."""
        EmptySerializer(data=request.data).is_valid(raise_exception=True)
        run = lifecycle.run_complete(run_id=pk, actor=actor_for(request))
        return self._run_response(run.pk)

    @idempotent_action(
        summary="Cancel a run and every open step and approval.",
        request=CancelRunSerializer,
        responses={200: RunSerializer, 400: BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    def cancel(self, request: Request, pk: uuid.UUID) -> Response:
        """Cancel the run (``runs.control.lifecycle.run_cancel``) with an optional ``reason``."""
        body = CancelRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = lifecycle.run_cancel(
            run_id=pk, actor=actor_for(request), reason=body.validated_data["reason"]
        )
        return self._run_response(run.pk)

    @idempotent_action(
        summary="Resume a failed run from its failed step.",
        request=EmptySerializer,
        responses={200: RunSerializer, 400: BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    def resume(self, request: Request, pk: uuid.UUID) -> Response:
        """Resume a failed run (``runs.control.lifecycle.run_resume``)."""
        EmptySerializer(data=request.data).is_valid(raise_exception=True)
        run = lifecycle.run_resume(run_id=pk, actor=actor_for(request))
        return self._run_response(run.pk)

    @idempotent_action(
        summary="Compensate a failed or cancelled run: undo its steps' effects, last first.",
        request=EmptySerializer,
        responses={200: RunSerializer, 400: BAD_INPUT, 404: _NOT_FOUND, 409: _CONFLICT},
    )
    def compensate(self, request: Request, pk: uuid.UUID) -> Response:
        """Compensate the run (``runs.control.compensation.run_compensate``): 409 when it is
        not failed or cancelled, was compensated already, or has nothing to undo."""
        EmptySerializer(data=request.data).is_valid(raise_exception=True)
        run = compensation.run_compensate(run_id=pk, actor=actor_for(request))
        return self._run_response(run.pk)

    @idempotent_action(
        summary="Fork a new run from the checkpoint before a step.",
        request=ForkRunSerializer,
        responses={201: RunSerializer, 400: BAD_INPUT, 404: _NOT_FOUND},
    )
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
        responses={200: EventPageSerializer, 400: BAD_INPUT, 404: _NOT_FOUND},
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
