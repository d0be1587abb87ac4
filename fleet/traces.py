"""Runs as OpenTelemetry traces (issue 36, part 2), exported over OTLP/HTTP with the official
``opentelemetry-sdk`` exporter to any collector.

A finished run is one trace: a span for the run (``invoke_agent``), one per step
(``execute_tool``, below the client's span when its append came with a ``traceparent`` of the
run's trace, with the GenAI semantic conventions' tool attributes, each failed attempt
that was retried an event ``retry``), one per gate wait under its step (the approval gate:
who decided, the decision, the seconds waited) and one per model turn (``chat``, with
``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens``, the cost as
``agentops.usage.cost_usd``). Attribute names: https://opentelemetry.io/docs/specs/semconv/gen-ai/
(the installed ``opentelemetry-semantic-conventions`` names them).

Ids are derived, never drawn: the trace id is the client's (the ``traceparent`` the run was
created with, ``Run.trace_parent``) or else the run's UUID; each span id is the first 8 bytes
of the SHA-256 of what it stands for (``span_id_of``). Exporting a run twice sends the very
same spans, so a retried or repeated export is idempotent for any backend that keys spans by
their ids.

Exports run after commit in a worker (``fleet.tasks.export_run_trace`` on its own queue,
``agentops.traces``), never in the transaction or the task that finished the run: a collector
that is down fails only the export, which is retried with backoff
(``AGENTOPS_OTEL_EXPORT_RETRIES``, ``retry_delay``).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Prefetch
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from approvals.models import ApprovalDecision, ApprovalRequest
from audit.models import AuditEvent
from runs.models import ModelCall, Run, Step, StepAttempt
from runs.statuses import AttemptStatus, RunStatus, StepStatus

# The audit verbs of a run that ended: its trace is exported then.
RUN_FINISHED_VERBS = frozenset(f"run.{status}" for status in ("succeeded", "failed", "cancelled"))
# Spans per OTLP request (a long run is sent in several).
EXPORT_BATCH = 512
# The longest error message kept in an attribute (characters).
MAX_MESSAGE = 1000
# A model call's parameters (``ModelCall.parameters``) as GenAI request attributes.
PARAMETER_ATTRIBUTES = {
    "temperature": gen_ai.GEN_AI_REQUEST_TEMPERATURE,
    "top_p": gen_ai.GEN_AI_REQUEST_TOP_P,
    "max_tokens": gen_ai.GEN_AI_REQUEST_MAX_TOKENS,
    "max_completion_tokens": gen_ai.GEN_AI_REQUEST_MAX_TOKENS,
    "frequency_penalty": gen_ai.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": gen_ai.GEN_AI_REQUEST_PRESENCE_PENALTY,
    "seed": gen_ai.GEN_AI_REQUEST_SEED,
}
# Steps that never started have no span.
_NOT_STARTED = {StepStatus.PENDING, StepStatus.SKIPPED}
_SCOPE = InstrumentationScope("agentops")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ExportFailed(Exception):
    """The collector did not take the spans (down, refused them, timed out)."""


def span_id_of(kind: str, key: object) -> int:
    """The span id (64 bits, never 0) of the thing ``kind`` ``key`` names (``"run"`` and a run
    id, ``"step"`` and a step id, ...): the first 8 bytes of the SHA-256 of
    ``agentops:<kind>:<key>``."""
    digest = hashlib.sha256(f"agentops:{kind}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def remote_parent(traceparent: str) -> SpanContext:
    """The client's span a stored ``traceparent`` (``runs.trace_context``'s canonical form)
    names."""
    _, trace_hex, span_hex, flags = traceparent.split("-")
    return SpanContext(
        int(trace_hex, 16),
        int(span_hex, 16),
        is_remote=True,
        trace_flags=TraceFlags(int(flags, 16)),
    )


def trace_of(run: Run) -> tuple[int, SpanContext | None]:
    """The trace id of ``run`` and the client's span its run span continues (None: the run
    starts its trace): from ``Run.trace_parent`` when the run was created with one, else the
    run's UUID as the trace id."""
    if run.trace_parent:
        parent = remote_parent(run.trace_parent)
        return parent.trace_id, parent
    return run.pk.int, None


def _ns(moment: datetime) -> int:
    """``moment`` in nanoseconds since the Unix epoch, to the microsecond."""
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` without empty values (OpenTelemetry refuses None), decimals as floats."""
    return {
        key: float(value) if isinstance(value, Decimal) else value
        for key, value in attributes.items()
        if value not in (None, "")
    }


def _error_status(error: Any) -> tuple[Status, dict[str, Any]]:
    """An error span status and the ``error.type`` attribute of a structured ``error``."""
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message", ""))[:MAX_MESSAGE]
    kind = str(error.get("type") or "error")
    return Status(StatusCode.ERROR, message or kind), {error_attributes.ERROR_TYPE: kind}


class _Builder:
    """The spans of one run, sharing its trace id, resource and instrumentation scope."""

    def __init__(self, run: Run, resource: Resource) -> None:
        self.run, self.resource = run, resource
        self.trace_id, self.client_parent = trace_of(run)
        self.flags = self.client_parent.trace_flags if self.client_parent else TraceFlags(1)
        self.run_context = self.context("run", run.pk)

    def context(self, kind: str, key: object) -> SpanContext:
        return SpanContext(self.trace_id, span_id_of(kind, key), False, self.flags)

    def span(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        start: datetime,
        end: datetime,
        attributes: dict[str, Any],
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        status: Status | None = None,
        events: list[Event] | None = None,
        links: list[Link] | None = None,
    ) -> ReadableSpan:
        return ReadableSpan(
            name=name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=_clean(attributes),
            events=events or [],
            links=links or [],
            kind=kind,
            status=status or Status(StatusCode.UNSET),
            start_time=_ns(start),
            end_time=_ns(max(start, end)),
            instrumentation_scope=_SCOPE,
        )

    @property
    def end(self) -> datetime:
        return self.run.finished_at or self.run.updated_at

    def run_span(self) -> ReadableSpan:
        run = self.run
        status: Status | None = None
        error: dict[str, Any] = {}
        if run.status == RunStatus.FAILED:
            status, error = _error_status(run.error)
        elif run.status == RunStatus.SUCCEEDED:
            status = Status(StatusCode.OK)
        name = f"invoke_agent {run.agent_name}" if run.agent_name else "invoke_agent"
        return self.span(
            name,
            self.run_context,
            self.client_parent,
            run.started_at or run.created_at,
            self.end,
            {
                gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value,
                gen_ai.GEN_AI_AGENT_ID: str(run.pk),
                gen_ai.GEN_AI_AGENT_NAME: run.agent_name,
                gen_ai.GEN_AI_AGENT_VERSION: run.agent_version,
                gen_ai.GEN_AI_CONVERSATION_ID: str(run.session_id or run.pk),
                gen_ai.GEN_AI_REQUEST_MODEL: run.model,
                gen_ai.GEN_AI_PROMPT_NAME: run.prompt_name,
                "agentops.prompt.version": run.prompt_version,
                "agentops.prompt.sha256": run.prompt.sha256 if run.prompt else None,
                "agentops.run.id": str(run.pk),
                "agentops.run.goal": run.goal[:MAX_MESSAGE],
                "agentops.run.status": run.status_info.value,
                "agentops.run.agent_kind": run.agent,
                "agentops.project": run.project.slug,
                "agentops.usage.tokens": run.usage_tokens,
                "agentops.usage.cost_usd": run.cost_usd,
                **error,
            },
            status=status,
        )

    def step_parent(self, step: Step) -> tuple[SpanContext, list[Link]]:
        """The parent of ``step``'s span: the client's span its append came from when that is
        in the run's trace (``Step.trace_parent``), else the run's span (linked to the
        client's span of another trace)."""
        if not step.trace_parent:
            return self.run_context, []
        client = remote_parent(step.trace_parent)
        if client.trace_id == self.trace_id:
            return client, []
        return self.run_context, [Link(client)]

    def step_spans(self, step: Step) -> Iterator[ReadableSpan]:
        context = self.context("step", step.pk)
        parent, links = self.step_parent(step)
        attempts = list(step.attempt_set.all())
        status: Status | None = None
        error: dict[str, Any] = {}
        if step.status in (StepStatus.FAILED, StepStatus.REJECTED):
            status, error = _error_status(step.error)
        elif step.status == StepStatus.SUCCEEDED:
            status = Status(StatusCode.OK)
        yield self.span(
            f"execute_tool {step.tool}",
            context,
            parent,
            step.created_at,
            step.finished_at or self.end,
            {
                gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value,
                gen_ai.GEN_AI_TOOL_NAME: step.tool,
                gen_ai.GEN_AI_TOOL_TYPE: "function",
                gen_ai.GEN_AI_TOOL_CALL_ID: step.tool_call_id,
                "agentops.step.id": step.pk,
                "agentops.step.index": step.index,
                "agentops.step.status": step.status_info.value,
                "agentops.step.risk": step.risk,
                "agentops.step.executor": step.executor,
                "agentops.step.attempts": step.attempts,
                "agentops.step.tool_error": step.tool_error,
                "agentops.step.idempotency_key": step.idempotency_key,
                **error,
            },
            status=status,
            events=[_retry_event(a) for a in attempts[:-1] if a.status == AttemptStatus.FAILED],
            links=links,
        )
        approval = getattr(step, "approval", None)
        if approval is not None:
            yield self.approval_span(step, approval, context)

    def approval_span(
        self, step: Step, approval: ApprovalRequest, step_context: SpanContext
    ) -> ReadableSpan:
        decisions = list(approval.decisions.all())
        end = approval.decided_at or step.finished_at or self.end
        return self.span(
            f"gate approval {step.tool}",
            self.context("approval", approval.pk),
            step_context,
            approval.created_at,
            end,
            {
                "agentops.gate.kind": "approval",
                "agentops.approval.id": approval.pk,
                "agentops.approval.decision": approval.status,
                "agentops.approval.reviewers": [d.reviewer_name for d in decisions],
                "agentops.approval.decisions": [d.decision for d in decisions],
                "agentops.approval.wait_seconds": (end - approval.created_at).total_seconds(),
                "agentops.approval.risk": approval.risk,
            },
        )

    def model_call_span(self, call: ModelCall) -> ReadableSpan:
        parameters = call.parameters if isinstance(call.parameters, dict) else {}
        requested = {
            attribute: parameters[name]
            for name, attribute in PARAMETER_ATTRIBUTES.items()
            if isinstance(parameters.get(name), int | float)
            and not isinstance(parameters.get(name), bool)
        }
        return self.span(
            f"chat {call.model}",
            self.context("model_call", call.pk),
            self.run_context,
            call.created_at - timedelta(milliseconds=call.latency_ms),
            call.created_at,
            {
                gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.CHAT.value,
                gen_ai.GEN_AI_REQUEST_MODEL: call.model,
                gen_ai.GEN_AI_USAGE_INPUT_TOKENS: call.input_tokens,
                gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: call.output_tokens,
                gen_ai.GEN_AI_AGENT_NAME: self.run.agent_name,
                "agentops.usage.cost_usd": call.cost_usd,
                "agentops.prompt.sha256": call.prompt.sha256 if call.prompt else None,
                **requested,
            },
            kind=SpanKind.CLIENT,
        )


def _retry_event(attempt: StepAttempt) -> Event:
    """The ``retry`` event of a failed attempt that was followed by another."""
    error = attempt.error if isinstance(attempt.error, dict) else {}
    return Event(
        "retry",
        attributes=_clean(
            {
                "agentops.attempt": attempt.number,
                "agentops.worker": attempt.worker,
                error_attributes.ERROR_TYPE: str(error.get("type") or "error"),
                "agentops.error.message": str(error.get("message", ""))[:MAX_MESSAGE],
            }
        ),
        timestamp=_ns(attempt.finished_at or attempt.started_at),
    )


def service_resource() -> Resource:
    """The resource of agentops' spans: OpenTelemetry's own (``OTEL_SERVICE_NAME``,
    ``OTEL_RESOURCE_ATTRIBUTES``, the SDK's attributes), its service named ``agentops`` when
    those name none."""
    detected = Resource.create()
    if str(detected.attributes.get("service.name", "")).startswith("unknown_service"):
        return detected.merge(Resource({"service.name": "agentops"}))
    return detected


def run_spans(run_id: uuid.UUID, *, resource: Resource | None = None) -> list[ReadableSpan]:
    """The spans of run ``run_id`` as they stand (see the module's docstring), the run's span
    first; empty for no such run. Five queries, whatever the run's length."""
    run = (
        Run.objects.select_related("project", "prompt")
        .defer("prompt__content")
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        return []
    builder = _Builder(run, resource or service_resource())
    steps = (
        Step.objects.filter(run_id=run_id)
        .exclude(status__in=_NOT_STARTED)
        .select_related("approval")
        .prefetch_related(
            Prefetch("attempt_set", queryset=StepAttempt.objects.order_by("number")),
            Prefetch("approval__decisions", queryset=ApprovalDecision.objects.order_by("id")),
        )
        .order_by("index")
    )
    calls = (
        ModelCall.objects.filter(run_id=run_id)
        .select_related("prompt")
        .defer("prompt__content")
        .order_by("id")
    )
    spans = [builder.run_span()]
    for step in steps:
        spans.extend(builder.step_spans(step))
    spans.extend(builder.model_call_span(call) for call in calls)
    return spans


def run_trace_export(*, run_id: uuid.UUID) -> int:
    """Export run ``run_id``'s spans (``run_spans``) to the collector OpenTelemetry's
    environment variables name (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, with their headers, timeout, compression and
    certificates), ``EXPORT_BATCH`` spans a request. Returns the spans sent (0: no such run).

    Raises:
        ExportFailed: the collector did not take a batch (the whole export is to be tried
            again: the same ids make a repeat harmless).
    """
    spans = run_spans(run_id)
    if not spans:
        return 0
    exporter = OTLPSpanExporter()
    try:
        for first in range(0, len(spans), EXPORT_BATCH):
            batch = spans[first : first + EXPORT_BATCH]
            if exporter.export(batch) is not SpanExportResult.SUCCESS:
                raise ExportFailed(f"the collector did not take the spans of run {run_id}")
    finally:
        exporter.shutdown()
    return len(spans)


def retry_delay(retries: int) -> int:
    """Seconds before retry number ``retries + 1`` of an export:
    ``AGENTOPS_OTEL_RETRY_BASE_SECONDS`` doubled per retry, capped at
    ``AGENTOPS_OTEL_RETRY_MAX_SECONDS``."""
    base = settings.AGENTOPS_OTEL_RETRY_BASE_SECONDS
    return int(min(settings.AGENTOPS_OTEL_RETRY_MAX_SECONDS, base * 2 ** min(retries, 30)))


def finished_runs(events: list[AuditEvent]) -> list[uuid.UUID]:
    """The runs ``events`` say ended (``RUN_FINISHED_VERBS``), once each, in order."""
    found = [event.run_id for event in events if event.verb in RUN_FINISHED_VERBS]
    return [run_id for run_id in dict.fromkeys(found) if run_id is not None]
