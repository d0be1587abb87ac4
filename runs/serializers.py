"""JSON shapes of runs, steps and tools for the REST API, and the API's input serializers.

Input serializers check the request's shape only (which keys, which JSON types); what the
values mean (the tool exists, arguments pass its schema, a transcript parses) is checked by
the services (``runs.control``), which raise ``InvalidInput`` (400).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentops.api import StrictSerializer
from agentops.serializers import FieldsBuiltOnce
from audit.serializers import AuditEventSerializer
from runs.budget import MAX_STEPS, budget_json
from runs.control.lifecycle import MAX_REASON
from runs.identity_serializers import IdentityInputSerializer, PromptRefSerializer
from runs.models import (
    AgentKind,
    Executor,
    OnBudgetExceeded,
    OnFailure,
    Run,
    Step,
    StepAttempt,
)
from runs.selectors import STEP_SUMMARY_FIELDS
from runs.statuses import run_status_choices, step_status_choices
from runs.tools import Tool


class StepAttemptSerializer(FieldsBuiltOnce, serializers.ModelSerializer[StepAttempt]):
    """One attempt of a step: 1-based ``number``, ``worker`` (host:pid), ``duration_ms`` (ms)."""

    class Meta:
        model = StepAttempt
        fields = ["number", "status", "worker", "started_at", "finished_at", "duration_ms", "error"]
        read_only_fields = fields


class StepApprovalSerializer(serializers.Serializer):
    """The approval request a step waits on (or waited on)."""

    id = serializers.IntegerField()
    status = serializers.CharField()


class StepSerializer(FieldsBuiltOnce, serializers.ModelSerializer[Step]):
    """A step with its approval and every attempt (``attempt_history``).

    Expects the step loaded by ``runs.selectors.steps_with_details`` (no extra queries).
    ``duration_ms`` (ms) spans the last attempt; ``result`` is the tool's verbatim output;
    ``tool_error`` is true when that output is the tool's error answer (the step still
    succeeded: the call happened and its answer went to the agent). ``compensates`` is the
    index of the step a compensating step undoes (null: not a compensation).
    """

    approval = serializers.SerializerMethodField()
    compensates = serializers.IntegerField(
        source="compensates.index", read_only=True, allow_null=True, default=None
    )
    status = serializers.ChoiceField(
        choices=step_status_choices(), source="status_info.value", read_only=True
    )
    required_approvals = serializers.SerializerMethodField()
    duration_ms = serializers.IntegerField(allow_null=True, read_only=True)
    attempt_history = StepAttemptSerializer(source="attempt_set", many=True, read_only=True)

    class Meta:
        model = Step
        fields = [
            "id",
            "index",
            "tool",
            "args",
            "risk",
            "required_approvals",
            "status",
            "attempts",
            "max_attempts",
            "timeout_seconds",
            "next_attempt_at",
            "executor",
            "args_schema",
            "result",
            "tool_error",
            "error",
            "usage",
            "budget_crossing",
            "policy_version",
            "rationale",
            "idempotency_key",
            "compensates",
            "approval",
            "created_at",
            "started_at",
            "finished_at",
            "duration_ms",
            "attempt_history",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.INT)
    def get_required_approvals(self, step: Step) -> int:
        # API v1's field: the approvals the step's approval gate needs (0: no approval gate).
        return int(step.gate_params.get("approvals", 0)) if step.gate else 0

    @extend_schema_field(StepApprovalSerializer(allow_null=True))
    def get_approval(self, step: Step) -> dict[str, Any] | None:
        # A missing reverse one-to-one raises RelatedObjectDoesNotExist, an AttributeError.
        approval = getattr(step, "approval", None)
        if approval is None:
            return None
        return {"id": approval.pk, "status": approval.status}


class StepSummarySerializer(FieldsBuiltOnce, serializers.ModelSerializer[Step]):
    """The few step fields the runs list shows (``runs.selectors.STEP_SUMMARY_FIELDS``)."""

    status = serializers.ChoiceField(choices=step_status_choices(), read_only=True)

    class Meta:
        model = Step
        fields = list(STEP_SUMMARY_FIELDS)
        read_only_fields = fields


_RUN_FIELDS = [
    "id",
    "status",
    "agent",
    "goal",
    "project",
    "requested_by",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "error",
    "metadata",
    "step_limit",
    "deadline",
    "budget",
    "client_done",
    "on_failure",
    "compensating",
    "usage_tokens",
    "cost_usd",
    "duration_ms",
    "version",
    "agent_name",
    "agent_version",
    "prompt",
    "model",
    "model_parameters",
]


class BudgetSerializer(serializers.Serializer):
    """A run's budget (``runs.budget``): ``max_tokens`` (tokens), ``max_cost_usd`` (USD),
    ``max_steps`` (steps), ``deadline``; ``on_exceed`` (``fail`` | ``approve``) says what
    crossing one does; ``grants`` counts approvals to continue, each one more allowance of
    every limit."""

    max_tokens = serializers.IntegerField(allow_null=True, required=False)
    max_cost_usd = serializers.FloatField(allow_null=True, required=False)
    max_steps = serializers.IntegerField(required=False, min_value=1)
    deadline = serializers.DateTimeField(allow_null=True, required=False)
    on_exceed = serializers.ChoiceField(choices=OnBudgetExceeded.choices, required=False)
    grants = serializers.IntegerField(read_only=True)


class _RunFieldsSerializer(FieldsBuiltOnce, serializers.ModelSerializer[Run]):
    """The fields of a run that both the list and the detail show; ``prompt`` expects the
    run's prompt joined (``runs.selectors``)."""

    status = serializers.ChoiceField(
        choices=run_status_choices(), source="status_info.value", read_only=True
    )
    project = serializers.CharField(
        source="project.slug", read_only=True, help_text="The slug of the run's project."
    )
    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True
    )
    cost_usd = serializers.DecimalField(
        max_digits=12, decimal_places=6, coerce_to_string=False, read_only=True
    )
    budget = serializers.SerializerMethodField()
    prompt = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = _RUN_FIELDS
        read_only_fields = fields

    @extend_schema_field(BudgetSerializer)
    def get_budget(self, run: Run) -> dict[str, Any]:
        return budget_json(run)

    @extend_schema_field(PromptRefSerializer(allow_null=True))
    def get_prompt(self, run: Run) -> dict[str, Any] | None:
        if run.prompt is None:
            return None
        return {"sha256": run.prompt.sha256, "name": run.prompt_name, "version": run.prompt_version}


class RunTotalsSerializer(_RunFieldsSerializer):
    """A run's status, budget and totals (``usage_tokens`` in tokens, ``cost_usd`` in USD,
    ``duration_ms`` in ms) without its steps or conversation: what a model turn answers."""


class RunListSerializer(_RunFieldsSerializer):
    """A run in the runs list: no conversation or state, and ``steps`` as short summaries.

    Expects the page's ``step_summaries`` (``runs.selectors.step_summaries``, already plain
    values: a page may hold thousands of steps) in the context. Usage totals: ``usage_tokens``
    (tokens), ``cost_usd`` (USD), ``duration_ms`` (ms in tools).
    """

    steps = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [*_RUN_FIELDS, "steps"]
        read_only_fields = fields

    @extend_schema_field(StepSummarySerializer(many=True))
    def get_steps(self, run: Run) -> list[dict[str, Any]]:
        summaries: dict[Any, list[dict[str, Any]]] = self.context["step_summaries"]
        return summaries.get(run.pk, [])


class RunSerializer(_RunFieldsSerializer):
    """A run with its conversation (every message in OpenAI chat format, oldest first; a long
    one is better read in pages: ``GET /api/v1/runs/{id}/messages/``), working ``state`` and
    every step in full.

    Usage totals: ``usage_tokens`` (tokens), ``cost_usd`` (USD), ``duration_ms`` (ms in tools).
    Expects the run loaded by ``runs.selectors.run_get`` (steps, approvals, attempts and
    messages prefetched).
    """

    conversation = serializers.SerializerMethodField()
    steps = StepSerializer(many=True, read_only=True)

    class Meta:
        model = Run
        fields = [*_RUN_FIELDS, "conversation", "message_count", "context_tokens", "state", "steps"]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_conversation(self, run: Run) -> list[dict[str, Any]]:
        return [message.as_openai() for message in run.messages.all()]


class StepInputSerializer(StrictSerializer):
    """One step a client wants run: a registered ``tool``, its ``args`` and why."""

    tool = serializers.CharField(max_length=128)
    args = serializers.DictField(required=False, default=dict)
    rationale = serializers.CharField(required=False, allow_blank=True, default="")
    usage = serializers.DictField(
        required=False,
        help_text="What choosing this call cost: model, input_tokens and output_tokens "
        "(tokens), cost_usd (USD), latency_ms (ms).",
    )


class AppendStepSerializer(StepInputSerializer):
    """``POST /api/v1/runs/{id}/steps/``: one step for a client run. ``executor`` ``server``
    names a registered tool the workers run; ``client``: the client runs the tool itself (any
    name) and reports its outcome once the step is ``ready``; ``args_schema`` is the JSON
    Schema of its arguments (a reviewer's edits are checked against it)."""

    executor = serializers.ChoiceField(choices=Executor.choices, default=Executor.SERVER)
    args_schema = serializers.DictField(required=False)


class StepReportSerializer(StrictSerializer):
    """``POST /api/v1/runs/{id}/steps/{step_id}/result/``: exactly one of ``result`` (any
    JSON: the tool's output; with ``is_error`` true when it is the tool's error answer, such
    as an MCP result with ``isError``), ``error`` (``{"type": str, "message": str,
    "retryable": bool}``: the tool could not be run) or ``outcome`` (``"unknown"``: the client
    cannot tell whether the call took effect)."""

    result = serializers.JSONField(required=False, allow_null=True)
    is_error = serializers.BooleanField(
        required=False,
        help_text="With result only: the result is the tool's error answer. The step still "
        "succeeds (the agent gets the answer) and is marked a tool error.",
    )
    error = serializers.DictField(required=False)
    outcome = serializers.ChoiceField(choices=["unknown"], required=False)


class DeclaredSchemaSerializer(StrictSerializer):
    """A state schema a run declares: ``name`` and ``version`` (default: the newest)."""

    name = serializers.SlugField(max_length=100)
    version = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)


class CreateRunSerializer(IdentityInputSerializer):
    """``POST /api/v1/runs/``: ``steps`` for plan and client runs, ``transcript`` (an OpenAI
    chat message list) for transcript runs; ``step_limit`` caps the steps; ``deadline`` is
    when the run fails if not finished; ``budget`` (``runs.budget.parse_budget``) sets every
    limit and what crossing one does; ``session`` (an id or external id) the session the run
    belongs to; ``agent_name``, ``agent_version``, ``prompt``, ``model`` and
    ``model_parameters`` what drives it (``IdentityInputSerializer``); ``grant``
    (``agentops.grants``) the tools it may call."""

    agent = serializers.ChoiceField(choices=AgentKind.choices)
    model = serializers.CharField(required=False, max_length=200, trim_whitespace=False)
    goal = serializers.CharField()
    project = serializers.SlugField(
        required=False,
        max_length=50,
        help_text="The project's slug. Default: the token's project, or the only one where "
        "you may create runs.",
    )
    steps = StepInputSerializer(many=True, required=False)
    transcript = serializers.ListField(child=serializers.DictField(), required=False)
    metadata = serializers.DictField(required=False)
    step_limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_STEPS)
    deadline = serializers.DateTimeField(required=False)
    budget = serializers.DictField(
        required=False,
        help_text="max_tokens (tokens), max_cost_usd (USD), max_steps, deadline (ISO 8601), "
        "on_exceed: fail (default) or approve (a reviewer approves continuing).",
    )
    state_schema = DeclaredSchemaSerializer(
        required=False,
        help_text="The project's state schema the agent's state follows (default version: "
        "the newest); writes of the state must match it.",
    )
    session = serializers.CharField(
        required=False,
        max_length=200,
        help_text="The session the run belongs to: its id or its external_id (an open "
        "session of the run's project).",
    )
    grant = serializers.JSONField(
        required=False,
        help_text='The tools the run may call: {"tools": [patterns], "constraints": '
        '{pattern: condition}}, e.g. {"tools": ["get_*", "book_*"], "constraints": '
        '{"book_*": "amount <= 500"}}. A call outside it (or the token\'s, session\'s or '
        "project's grant) ends refused (not_granted) and is never made.",
    )
    on_failure = serializers.ChoiceField(
        choices=OnFailure.choices,
        required=False,
        help_text="stop (default: an operator may compensate the failed run) or compensate "
        "(its failure starts its compensation).",
    )


class CancelRunSerializer(StrictSerializer):
    """``POST /api/v1/runs/{id}/cancel/``: an optional reason, kept in the run's error."""

    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_REASON
    )


class SettleStepSerializer(StrictSerializer):
    """``POST /api/v1/runs/{id}/steps/{step_id}/settle/``: whether the call of a step whose
    outcome is unknown took effect (``happened``), its ``result`` if it did (any JSON), and
    how the operator knows (``reason``)."""

    happened = serializers.BooleanField()
    result = serializers.JSONField(required=False, allow_null=True, default=None)
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_REASON
    )


class ForkRunSerializer(StrictSerializer):
    """``POST /api/v1/runs/{id}/fork/``: the index of the first step to run in the new run,
    optionally new arguments for that step, and the version of the agent's state the new run
    starts with (default: the last before the agent's first write for that step or later)."""

    from_index = serializers.IntegerField(min_value=0, max_value=MAX_STEPS)
    args = serializers.JSONField(required=False, allow_null=True, default=None)
    state_version = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=0, max_value=2**31 - 1
    )


class EmptySerializer(StrictSerializer):
    """A body with no fields (``complete``, ``resume``)."""


class EventQuerySerializer(serializers.Serializer):
    """``?after=`` (last event id seen, 0 for all) and ``?limit=`` (1-1000, default 500)."""

    after = serializers.IntegerField(required=False, default=0, min_value=0, max_value=2**63 - 1)
    limit = serializers.IntegerField(required=False, default=500, min_value=1, max_value=1000)


class EventPageSerializer(serializers.Serializer):
    """A page of a run's audit events; pass ``next_after`` as ``after`` to get the next."""

    events = AuditEventSerializer(many=True)
    next_after = serializers.IntegerField()


class ToolSerializer(serializers.Serializer):
    """A registered tool: ``schema`` is the JSON Schema of its args; ``timeout_seconds`` (s);
    ``idempotent``: a call whose outcome is unknown may be repeated."""

    name = serializers.CharField()
    description = serializers.CharField()
    schema = serializers.SerializerMethodField()
    risk = serializers.CharField()
    side_effects = serializers.BooleanField()
    idempotent = serializers.BooleanField()
    timeout_seconds = serializers.IntegerField()
    max_attempts = serializers.IntegerField()

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_schema(self, tool: Tool) -> dict[str, Any]:
        return tool.schema
