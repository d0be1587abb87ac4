"""Runs, their steps and attempts, checkpoints and the tool-call ledger (the kinds their
fields choose from in ``runs.models.choices``, retention in ``runs.models.retention``, the
API's idempotency keys in ``runs.models.idempotency``).

Statuses are ``FSMField(protected=True)``: they change only through the transition methods
below, which touch nothing but their own row. Every side effect of a transition (audit event,
checkpoint, enqueueing, broadcasting) belongs to the services that call them
(``runs.executor``, ``runs.control``, ``runs.recovery``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse
from django_fsm import FSMField, transition

from agentops.fields import DeepJSONField
from agentops.fsm import GuardedTransitions
from agentops.statuses import StatusInfo
from projects.models import default_project_id
from runs.models.choices import (
    CLIENT_DRIVEN,
    AgentKind,
    Executor,
    OnBudgetExceeded,
    OnFailure,
    Risk,
)
from runs.models.conversation import Compaction, Message
from runs.models.idempotency import IdempotencyKey, IdempotencyKeyStatus
from runs.models.prompts import MAX_NAME, MAX_VERSION, SystemPrompt
from runs.models.retention import (
    PURGE_OPEN,
    PurgeStatus,
    RetentionAction,
    RetentionPolicy,
    RetentionPurge,
    _terminal_statuses,
)
from runs.models.saved_views import SavedView
from runs.models.sessions import AgentSession, SessionStatus
from runs.models.state import (
    STATE_SCHEMA_VERSION,
    StateSchema,
    StateVersion,
    state_etag,
    state_hash,
)
from runs.models.threads import ThreadBlob, ThreadCheckpoint, ThreadWrite
from runs.statuses import (
    ATTEMPT_STATUSES,
    OPEN_STEP_STATUSES,
    RUN_TERMINAL,
    STEP_CANCELLABLE,
    STEP_TERMINAL,
    AttemptStatus,
    CallStatus,
    RunStatus,
    StepStatus,
    run_status_info,
    step_status_info,
)

__all__ = [
    "CLIENT_DRIVEN",
    "PURGE_OPEN",
    "STATE_SCHEMA_VERSION",
    "AgentKind",
    "AgentSession",
    "Checkpoint",
    "Compaction",
    "Executor",
    "IdempotencyKey",
    "IdempotencyKeyStatus",
    "Message",
    "ModelCall",
    "OnBudgetExceeded",
    "OnFailure",
    "PurgeStatus",
    "RetentionAction",
    "RetentionPolicy",
    "RetentionPurge",
    "Risk",
    "Run",
    "SavedView",
    "SessionStatus",
    "StateSchema",
    "StateVersion",
    "Step",
    "StepAttempt",
    "SystemPrompt",
    "ThreadBlob",
    "ThreadCheckpoint",
    "ThreadWrite",
    "ToolCall",
    "_terminal_statuses",
    "state_etag",
    "state_hash",
]


# django-fsm conditions: called with the instance (typed as any model by its stubs).
def _compensating(run: models.Model) -> bool:
    return bool(getattr(run, "compensating", False))


def _not_compensating(run: models.Model) -> bool:
    return not _compensating(run)


class Run(GuardedTransitions, models.Model):
    """One agent task: its goal, the agent driving it, its working state and conversation.

    ``state`` is the executor's bookkeeping carried between steps (``completed_steps``,
    ``last_step``; ``checkpoints`` keep a copy after each step); the agent's own task state
    (goal, plan, observations, decisions) is apart from it, in ``state_versions``
    (``StateVersion``, written through ``runs.control.state``), so neither overwrites the
    other; its conversation is its ``messages`` (``Message`` rows, OpenAI chat format),
    ``message_count`` of them (the next message's position), and ``context_tokens`` (tokens)
    the size of its active context: the messages no ``compactions`` replaced, and the
    summaries that replaced the others (``runs.control.compaction``);
    ``client_done`` is set when a client agent says it appends no more steps. Usage totals:
    ``usage_tokens`` (tokens), ``cost_usd`` (USD), ``duration_ms`` (ms spent in tool calls).
    Budget (``runs.budget``): ``max_tokens`` (tokens), ``max_cost_usd`` (USD), ``step_limit``
    (steps) and ``deadline`` (an absolute time); crossing one fails the run or, with
    ``on_budget_exceeded`` = approve, makes the next step wait for a reviewer's approval to
    continue, and each such approval (``budget_grants``) grants one more allowance of every
    limit. ``gate`` names the gate kind the run waits at while its status is
    ``waiting`` (``runs.gates``), else it is empty. ``forked_from`` is the run it was forked
    from (``runs.control.fork``; its ``forks`` are its children), emptied when that run is
    deleted, and ``forked_from_index`` the index of the source's step the fork started from:
    both are written by the server alone, and the pages trust only them. ``session`` is the
    session (``AgentSession``) the run belongs to, set when it is created: the messages it
    appends join the session's conversation too. ``grants`` are the tool grants fixed when
    the run was created (``agentops.grants``): ``[{"source": "run" | "token", "grant":
    {...}}]``, the run's own and that of the API token that created it; each call must be
    allowed by them and by its session's and project's grants as they are then.
    ``metadata["forked_from"]`` names them too, but metadata is the client's, which may write
    anything there when it creates a run.
    """

    # The fields that change after the row is inserted: what ``runs.store.writes.update`` writes
    # (with ``updated_at``). tests/runs/test_row_writes.py proves every field a transition or
    # service changes is here.
    UPDATED_FIELDS = (
        "status",
        "gate",
        "version",
        "error",
        "client_done",
        "compensating",
        "budget_grants",
        "state",
        "message_count",
        "context_tokens",
        "usage_tokens",
        "cost_usd",
        "duration_ms",
        "started_at",
        "finished_at",
        "agent_name",
        "agent_version",
        "prompt",
        "prompt_name",
        "prompt_version",
        "model",
        "model_parameters",
    )

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    goal = models.TextField()
    agent = models.CharField(max_length=16, choices=AgentKind.choices)
    input = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    grants = models.JSONField(default=list, db_default=[], blank=True)
    state = models.JSONField(default=dict, blank=True)
    message_count = models.PositiveIntegerField(default=0, db_default=0)
    context_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    project = models.ForeignKey(
        "projects.Project",
        on_delete=models.PROTECT,
        related_name="runs",
        default=default_project_id,
        help_text="Who may see and act on the run: the project's members (projects.access).",
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    session = models.ForeignKey(
        "runs.AgentSession",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="runs",
        help_text="The session the run belongs to (None: none); same project, set at creation.",
    )
    forked_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="forks",
        help_text="The run this one was forked from (emptied when that run is deleted).",
    )
    forked_from_index = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The index of the source run's step this fork started from (None: no fork).",
    )
    state_schema = models.ForeignKey(
        "runs.StateSchema",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.PROTECT,
        related_name="runs",
        help_text="The schema version of the agent's state the run declared when created "
        "(None: none); its state follows the newest version of that schema's name.",
    )
    # Database defaults too: rows written around the ORM (benchmarks, SQL) need not name them.
    agent_name = models.CharField(max_length=MAX_NAME, blank=True, default="", db_default="")
    agent_version = models.CharField(max_length=MAX_VERSION, blank=True, default="", db_default="")
    prompt = models.ForeignKey(
        "runs.SystemPrompt",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.PROTECT,
        related_name="runs",
        help_text="The system prompt the run's agent was last sent (None: not reported).",
    )
    prompt_name = models.CharField(max_length=MAX_NAME, blank=True, default="", db_default="")
    prompt_version = models.CharField(max_length=MAX_VERSION, blank=True, default="", db_default="")
    model = models.CharField(max_length=200, blank=True, default="", db_default="")
    model_parameters = models.JSONField(default=dict, blank=True, db_default={})
    trace_parent = models.CharField(max_length=55, blank=True, default="", db_default="")
    status = FSMField(
        max_length=32, choices=RunStatus.choices, default=RunStatus.QUEUED, protected=True
    )
    gate = models.CharField(max_length=32, blank=True)
    version = models.PositiveIntegerField(default=0)
    error = models.JSONField(null=True, blank=True)
    client_done = models.BooleanField(default=False)
    compensating = models.BooleanField(default=False, db_default=False)
    on_failure = models.CharField(
        max_length=16, choices=OnFailure.choices, default=OnFailure.STOP, db_default=OnFailure.STOP
    )
    step_limit = models.PositiveIntegerField(default=500)
    deadline = models.DateTimeField(null=True, blank=True)
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    max_cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    on_budget_exceeded = models.CharField(
        max_length=8, choices=OnBudgetExceeded.choices, default=OnBudgetExceeded.FAIL
    )
    budget_grants = models.PositiveIntegerField(default=0)
    usage_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    duration_ms = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="run_status_idx"),
            # The runs list's and overview's filters by agent and prompt version.
            models.Index(
                fields=["agent_name", "agent_version", "-created_at"], name="run_agent_version_idx"
            ),
            models.Index(
                fields=["prompt_name", "prompt_version", "-created_at"],
                name="run_prompt_version_idx",
            ),
        ]
        permissions = [
            ("cancel_run", "Can cancel runs"),
            ("resume_run", "Can resume failed runs"),
            ("drive_run", "Can append steps to and complete client runs"),
            ("erase_subject", "Can erase a subject's sessions, conversations and state"),
        ]

    def __str__(self) -> str:
        return f"{self.goal[:40]} ({self.status})"

    def get_absolute_url(self) -> str:
        """The run's page (its timeline)."""
        return reverse("run-detail", args=[self.pk])

    @property
    def is_terminal(self) -> bool:
        return self.status in RUN_TERMINAL

    @property
    def status_info(self) -> StatusInfo:
        """The status as shown (``runs.statuses``): value, label, tone."""
        return run_status_info(self.status, self.gate)

    @transition(field=status, source=RunStatus.QUEUED, target=RunStatus.RUNNING)
    def start(self) -> None:
        """queued → running: the executor picked the run up."""

    @transition(field=status, source=RunStatus.RUNNING, target=RunStatus.WAITING)
    def wait(self, *, gate: str) -> None:
        """running → waiting: its next step waits at a gate of kind ``gate``."""
        self.gate = gate

    @transition(field=status, source=RunStatus.WAITING, target=RunStatus.RUNNING)
    def unblock(self) -> None:
        """waiting → running: the gate its step waited at was satisfied."""
        self.gate = ""

    @transition(
        field=status,
        source=RunStatus.RUNNING,
        target=RunStatus.SUCCEEDED,
        conditions=[_not_compensating],
    )
    def succeed(self) -> None:
        """running → succeeded: every step succeeded and the agent has nothing more."""
        self.error = None

    @transition(
        field=status,
        source=[RunStatus.RUNNING, RunStatus.WAITING],
        target=RunStatus.FAILED,
        conditions=[_not_compensating],
    )
    def fail(self, error: dict[str, Any]) -> None:
        """running|waiting → failed, keeping ``error`` (type, message, ...)."""
        self.error = error
        self.gate = ""

    @transition(
        field=status,
        source=[RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING],
        target=RunStatus.CANCELLED,
        conditions=[_not_compensating],
    )
    def cancel(self, error: dict[str, Any]) -> None:
        """queued|running|waiting → cancelled, keeping who cancelled and why."""
        self.error = error
        self.gate = ""

    @transition(field=status, source=RunStatus.FAILED, target=RunStatus.RUNNING)
    def resume(self) -> None:
        """failed → running: continue from the failed step (completed steps are kept)."""
        self.error = None

    @transition(
        field=status,
        source=[RunStatus.FAILED, RunStatus.CANCELLED],
        target=RunStatus.RUNNING,
        conditions=[_not_compensating],
    )
    def compensate(self) -> None:
        """failed|cancelled → running, compensating: its compensating steps run next (in
        reverse order of the steps they undo); ``error`` keeps why the run stopped. Once."""
        self.compensating = True

    @transition(
        field=status,
        source=RunStatus.RUNNING,
        target=RunStatus.COMPENSATED,
        conditions=[_compensating],
    )
    def finish_compensation(self) -> None:
        """running (compensating) → compensated: every compensating step succeeded."""

    @transition(
        field=status,
        source=[RunStatus.RUNNING, RunStatus.WAITING],
        target=RunStatus.COMPENSATION_FAILED,
        conditions=[_compensating],
    )
    def fail_compensation(self, error: dict[str, Any]) -> None:
        """running|waiting (compensating) → compensation_failed, keeping ``error`` (type,
        message, ``left_undone``: the steps whose effects remain)."""
        self.error = error
        self.gate = ""


class Step(GuardedTransitions, models.Model):
    """One tool call of a run, at position ``index`` (0-based).

    ``idempotency_key`` is ``{run_id}:{index}:{tool}:{args_hash}`` (``args_hash``: SHA-256 of the
    canonical JSON of ``args``); it keys the tool-call ledger. ``result`` is the verbatim tool
    output; ``error`` the structured failure of the last attempt (type, message, traceback,
    attempt, at, retryable). ``gate`` names the gate kind (``runs.gates``) the step must pass
    before it runs (empty: none) and ``gate_params`` that kind's parameters for it (for an
    approval gate, its approval policy), both set by the step policy when the step was created.
    ``executor`` says who runs the tool: agentops' workers (a registered tool) or the client
    app (any tool name; ``args_schema``, the JSON Schema the client gave, checks its arguments),
    which gets the step when it is ``ready`` and reports its outcome
    (``runs.executor.client``). ``declared_risk`` is the risk the tool's own server declared
    for the call (an MCP server's annotations; empty: none), kept so that arguments a person
    edits are classified again as the call was (``runs.gates.StepRequest``).
    ``budget_crossing`` is set when the step had to wait for an
    approval to continue because its run crossed its budget (``runs.budget``).
    ``requested_by`` is who asked for the step (the run's requester, or the user whose
    session or token appended it): four eyes keeps them from deciding its approval.
    ``refusal`` is set when the step policy refused the call before any gate (``{"type":
    "not_granted", "reason", "message", ...}``: outside the run's grants, ``agentops.grants``,
    or a ``deny`` risk rule); the step then ends ``refused`` when its turn comes.
    ``policy_version`` is the version of its project's policy the step was classified under
    (``projects.models.Project.policy_version``; None: classified before versions existed).
    ``compensates`` is the step a compensating step undoes (``runs.control.compensation``;
    None for the others): its tool, arguments and idempotency key come from that step's
    declared compensation (``runs.tools.compensation_of``).
    ``recorded_result`` holds the recorded output a transcript step replays instead of calling
    a tool (None for live tools).
    ``tool_error`` marks a succeeded step whose tool answered with an error instead of a
    result (an MCP result with ``isError``, a client's report with ``is_error``, or a result
    in the error form its tool declares, ``runs.tools.tool_error_of``): the call happened and
    its answer is on record for the agent, but it did not do what was asked.
    ``trace_parent`` is the W3C ``traceparent`` of the client's request that appended it
    (empty: none): its span in the run's trace hangs below the client's (``fleet.traces``).
    ``timeout_seconds`` bounds one attempt; ``next_attempt_at`` is when a step waiting to retry
    is due; the lease
    (``lease_owner``, ``lease_expires_at``) names the worker running it. ``usage`` holds what
    the tool reported (tokens, cost_usd).
    """

    # The fields that change after the row is inserted: what ``runs.store.writes.update`` writes
    # (with ``updated_at``). tests/runs/test_row_writes.py proves every field a transition or
    # service changes is here.
    UPDATED_FIELDS = (
        "status",
        "attempts",
        "max_attempts",
        "next_attempt_at",
        "lease_owner",
        "lease_expires_at",
        "result",
        "tool_error",
        "error",
        "started_at",
        "finished_at",
    )

    # No index of its own: step_run_index_uniq (run, index) finds a run's steps, in order.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    index = models.PositiveIntegerField()
    tool = models.CharField(max_length=128)
    args = DeepJSONField(default=dict, blank=True)
    args_hash = models.CharField(max_length=64)
    executor = models.CharField(max_length=8, choices=Executor.choices, default=Executor.SERVER)
    args_schema = models.JSONField(default=dict, blank=True)
    # A database default too: rows written around the ORM (benchmarks, SQL) need not name it.
    declared_risk = models.CharField(
        max_length=16, choices=Risk.choices, blank=True, default="", db_default=""
    )
    budget_crossing = models.JSONField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    idempotency_key = models.CharField(max_length=300)
    risk = models.CharField(max_length=16, choices=Risk.choices)
    gate = models.CharField(max_length=32, blank=True)
    gate_params = models.JSONField(default=dict, blank=True)
    rationale = models.TextField(blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True)
    trace_parent = models.CharField(max_length=55, blank=True, default="", db_default="")
    recorded_result = models.JSONField(null=True, blank=True)
    refusal = models.JSONField(null=True, blank=True)
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    compensates = models.OneToOneField(
        "self",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.CASCADE,
        related_name="compensation",
        help_text="The step of the same run this step undoes (None: not a compensation).",
    )
    status = FSMField(
        max_length=32, choices=StepStatus.choices, default=StepStatus.PENDING, protected=True
    )
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    timeout_seconds = models.PositiveIntegerField(default=60)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=128, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    result = DeepJSONField(null=True, blank=True)
    tool_error = models.BooleanField(default=False, db_default=False)
    error = models.JSONField(null=True, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        # Unique keys as constraints, not ``unique=True``: on PostgreSQL a unique CharField
        # also gets a LIKE index (varchar_pattern_ops) that nothing here uses and that every
        # write of a step (two a step: it and the next one) would keep up to date.
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="step_run_index_uniq"),
            models.UniqueConstraint(fields=["idempotency_key"], name="step_idempotency_key_uniq"),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="step_status_idx"),
            # A run's open steps in order (``runs.transitions.status_in``): one entry a step
            # while it is open, none once it has ended.
            models.Index(
                fields=["run", "index"],
                name="step_open_idx",
                condition=models.Q(status__in=OPEN_STEP_STATUSES),
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.index} {self.tool} ({self.status})"

    def get_absolute_url(self) -> str:
        """The step on its run's page (the ``#step-<index>`` anchor)."""
        return f"{reverse('run-detail', args=[self.run_id])}#step-{self.index}"

    @property
    def is_terminal(self) -> bool:
        return self.status in STEP_TERMINAL

    @property
    def status_info(self) -> StatusInfo:
        """The status as shown (``runs.statuses``): value, label, tone."""
        return step_status_info(self.status, self.gate)

    @staticmethod
    def args_digest(args: dict[str, Any]) -> str:
        """SHA-256 hex digest of the canonical JSON (sorted keys, no spaces) of ``args``."""
        text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    @staticmethod
    def key_for(run_id: Any, index: int, tool: str, digest: str) -> str:
        """The idempotency key of the call of ``tool`` at ``index`` of run ``run_id`` with the
        arguments whose digest is ``digest``: ``{run_id}:{index}:{tool}:{digest}``."""
        return f"{run_id}:{index}:{tool}:{digest}"

    @property
    def duration_ms(self) -> int | None:
        if self.started_at and self.finished_at:
            return int((self.finished_at - self.started_at).total_seconds() * 1000)
        return None

    @transition(field=status, source=StepStatus.PENDING, target=StepStatus.WAITING)
    def wait(self) -> None:
        """pending → waiting: it must pass its gate (``gate``) before it runs."""

    @transition(
        field=status, source=[StepStatus.PENDING, StepStatus.WAITING], target=StepStatus.READY
    )
    def hand_over(self, *, now: Any) -> None:
        """pending|waiting (gate satisfied) → ready: its client may run the tool now."""
        self.started_at = now
        self.finished_at = None

    @transition(field=status, source=StepStatus.READY, target=StepStatus.RUNNING)
    def report_start(self, *, owner: str, now: Any) -> None:
        """ready → running: the client reports an outcome (recorded in the same transaction);
        counts one more attempt."""
        self.attempts += 1
        self.lease_owner = owner
        self.started_at = self.started_at or now
        self.finished_at = None

    @transition(field=status, source=StepStatus.RUNNING, target=StepStatus.READY)
    def hand_back(self, *, error: dict[str, Any], now: Any) -> None:
        """running → ready: the client reported a retryable error and attempts remain; it may
        run the tool again."""
        self.error = error
        self.finished_at = now
        self.lease_owner, self.lease_expires_at = "", None

    @transition(field=status, source=StepStatus.FAILED, target=StepStatus.READY)
    def retry_by_client(self, *, now: Any) -> None:
        """failed → ready: an operator resumed the run; the client step gets fresh attempts."""
        self.max_attempts = self.attempts + max(1, self.max_attempts)
        self.started_at, self.finished_at = now, None

    @transition(
        field=status,
        source=[StepStatus.PENDING, StepStatus.WAITING, StepStatus.WAITING_RETRY],
        target=StepStatus.QUEUED,
    )
    def enqueue(self) -> None:
        """pending|waiting (gate satisfied)|waiting_retry (due) → queued."""
        self.next_attempt_at = None

    @transition(field=status, source=StepStatus.QUEUED, target=StepStatus.RUNNING)
    def claim(self, *, owner: str, lease_expires_at: Any, now: Any) -> None:
        """queued → running: a worker took it under a lease; counts one more attempt."""
        self.attempts += 1
        self.lease_owner = owner
        self.lease_expires_at = lease_expires_at
        self.started_at = now
        self.finished_at = None

    @transition(field=status, source=StepStatus.RUNNING, target=StepStatus.SUCCEEDED)
    def succeed(self, *, result: Any, now: Any, tool_error: bool = False) -> None:
        """running → succeeded with the verbatim ``result``; ``tool_error`` when the tool
        answered with an error (the step still completed: the run goes on with it)."""
        self.result = result
        self.tool_error = tool_error
        self.error = None
        self.finished_at = now
        self.lease_owner, self.lease_expires_at = "", None

    @transition(field=status, source=StepStatus.RUNNING, target=StepStatus.WAITING)
    def hold_result(self, *, result: Any, error: dict[str, Any], now: Any) -> None:
        """running → waiting: its ``result`` failed a validator that holds it at a gate
        (``runs.tools.validators``); ``error`` says which rule and where."""
        self.result = result
        self.error = error
        self.finished_at = now
        self.lease_owner, self.lease_expires_at = "", None

    @transition(field=status, source=StepStatus.WAITING, target=StepStatus.SUCCEEDED)
    def accept_result(self, *, now: Any) -> None:
        """waiting (its result held) → succeeded: a reviewer accepted the result it holds."""
        self.error = None
        self.finished_at = now

    @transition(field=status, source=StepStatus.RUNNING, target=StepStatus.WAITING_RETRY)
    def schedule_retry(self, *, error: dict[str, Any], next_attempt_at: Any, now: Any) -> None:
        """running → waiting_retry until ``next_attempt_at``."""
        self.error = error
        self.next_attempt_at = next_attempt_at
        self.finished_at = now
        self.lease_owner, self.lease_expires_at = "", None

    @transition(field=status, source=StepStatus.RUNNING, target=StepStatus.FAILED)
    def fail(self, *, error: dict[str, Any], now: Any) -> None:
        """running → failed: attempts are used up or the error is not retryable."""
        self.error = error
        self.finished_at = now
        self.lease_owner, self.lease_expires_at = "", None

    @transition(field=status, source=StepStatus.FAILED, target=StepStatus.SUCCEEDED)
    def settle_happened(self, *, result: Any, now: Any) -> None:
        """failed (outcome unknown) → succeeded: an operator says the call took effect and
        gives its ``result``."""
        self.result = result
        self.tool_error = False
        self.error = None
        self.finished_at = now

    @transition(field=status, source=StepStatus.FAILED, target=StepStatus.QUEUED)
    def retry(self) -> None:
        """failed → queued: an operator resumed the run; the step gets fresh attempts."""
        self.max_attempts = self.attempts + max(1, self.max_attempts)

    @transition(field=status, source=StepStatus.WAITING, target=StepStatus.REJECTED)
    def reject(self, *, error: dict[str, Any], now: Any) -> None:
        """waiting → rejected: its gate refused, with the refusal in ``error`` (type, message,
        and what the gate kind adds, e.g. the reviewer)."""
        self.error = error
        self.finished_at = now

    @transition(field=status, source=StepStatus.PENDING, target=StepStatus.REFUSED)
    def refuse(self, *, now: Any) -> None:
        """pending → refused: the call is outside its run's grant, or a ``deny`` rule matched
        (``refusal``, decided when the step was created); it is never called, and its
        ``error`` is the refusal, which is what the agent sees."""
        self.error = self.refusal
        self.finished_at = now

    @transition(field=status, source=StepStatus.PENDING, target=StepStatus.SKIPPED)
    def skip(self) -> None:
        """pending → skipped: the run ended before reaching it."""

    @transition(field=status, source=list(STEP_CANCELLABLE), target=StepStatus.CANCELLED)
    def cancel(self, *, now: Any) -> None:
        """Any non-terminal status → cancelled."""
        self.finished_at = now
        self.lease_owner, self.lease_expires_at = "", None


class StepAttempt(models.Model):
    """One execution attempt of a step, kept so retry and failure context survive.

    ``number`` is 1-based; ``worker`` the ``host:pid`` that ran it; ``duration_ms`` in ms;
    ``error`` the structured error of a failed attempt.
    """

    # No index of its own: attempt_step_number_uniq (step, number) finds a step's attempts.
    step = models.ForeignKey(
        Step, on_delete=models.CASCADE, related_name="attempt_set", db_index=False
    )
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=AttemptStatus.choices)
    worker = models.CharField(max_length=128, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["step", "number"]
        constraints = [
            models.UniqueConstraint(fields=["step", "number"], name="attempt_step_number_uniq"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of step {self.step_id} ({self.status})"

    @property
    def status_info(self) -> StatusInfo:
        """The status as shown: value, label, tone (``runs.statuses.ATTEMPT_STATUSES``)."""
        return ATTEMPT_STATUSES[self.status]


class Checkpoint(models.Model):
    """The run's materialized ``state`` right after the step at ``index`` succeeded.

    ``state`` is a full copy, so the state before step N is the checkpoint of step N-1 (or the
    run's initial state) and a fork can start from any checkpoint.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.OneToOneField(Step, on_delete=models.CASCADE, related_name="checkpoint")
    index = models.PositiveIntegerField()
    state = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "index"]

    def __str__(self) -> str:
        return f"checkpoint {self.index} of run {self.run_id}"


class ToolCall(models.Model):
    """The tool-call ledger: one row per idempotency key with the outcome of its side effect.

    The row is written as ``started`` in the same transaction that claims the step, before the
    tool is called, and set to ``succeeded`` (with the verbatim ``result``) or ``failed`` (the
    tool reported a failure, so nothing happened) when it returns. A row still ``started``
    after its attempt ended means the outcome is unknown: the worker died or the tool timed out
    mid-call. A later attempt then returns a succeeded row's result instead of calling the tool
    again, and refuses to repeat a non-idempotent tool whose outcome is unknown.
    ``attempt`` is the step attempt that last started the call; ``duration_ms`` in ms.
    ``report`` is what a client reported for a tool it ran itself (``runs.executor.client``),
    kept to tell a repeated report from a different one.
    """

    idempotency_key = models.CharField(max_length=300)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_calls")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="tool_calls")
    tool = models.CharField(max_length=128)
    status = models.CharField(max_length=16, choices=CallStatus.choices)
    attempt = models.PositiveIntegerField()
    result = models.JSONField(null=True, blank=True)
    report = models.JSONField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # A constraint, not ``unique=True``: no LIKE index to keep up (see ``Step.Meta``).
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_key"], name="toolcall_idempotency_key_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.idempotency_key} ({self.status})"


class ModelCall(models.Model):
    """One call of the agent's model in a client run, as its client reported it: ``model``
    name, ``input_tokens`` and ``output_tokens`` (tokens), ``cost_usd`` (USD), ``latency_ms``
    (ms), and the positions of the run's messages (``Message.position``) reported with it
    (``first_message`` .. ``first_message + messages - 1``), the system ``prompt`` it was sent
    (None: not reported) and its ``parameters`` (a JSON object: temperature, top_p, ...). Its
    tokens and cost are added to the run's totals when it is recorded
    (``runs.control.conversation``)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="model_calls")
    model = models.CharField(max_length=200)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    first_message = models.PositiveIntegerField(default=0)
    messages = models.PositiveIntegerField(default=0)
    prompt = models.ForeignKey(
        "runs.SystemPrompt",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="model_calls",
    )
    parameters = models.JSONField(default=dict, blank=True, db_default={})
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]

    def __str__(self) -> str:
        return f"{self.model} call of run {self.run_id}"
