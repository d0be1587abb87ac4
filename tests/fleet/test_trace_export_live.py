"""Runs exported as OpenTelemetry traces to a real OTLP/HTTP receiver (``testsupport.otlp``),
through a web server and a Celery worker of the test's own with the standard
``OTEL_EXPORTER_OTLP_ENDPOINT``: a client run with two model turns, a tool call, an approval
and a retry arrives as one trace, inside the agent's own trace (the ``traceparent`` of its
requests: the run below the agent's span, the tool call below the agent's span of it), with the
expected spans and GenAI attributes; with the receiver down the run finishes all the same and
its spans arrive once the receiver is back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentops_client import Client
from django.conf import settings
from opentelemetry.sdk.trace import TracerProvider

from agentops import celery_app
from fleet.traces import span_id_of
from runs.models import Run, Step, StepStatus
from tests.conftest import AsgiServer, Worker, wait_for
from testsupport.factories import make_token, make_user
from testsupport.otlp import OtlpReceiver, ReceivedSpan

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PROMPT = "You are the refunds desk. Refund at most $100."


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    made = OtlpReceiver()
    yield made
    made.stop()


@pytest.fixture
def traced(transactional_db, seeded, tmp_path: Path, receiver: OtlpReceiver) -> Iterator[str]:
    """A web server and a worker exporting to ``receiver`` (retries after 1 s); workers
    already running (the session's) stop consuming for the test, so this one gets the
    steps and the exports. Yields the server's URL."""
    queues = [settings.CELERY_TASK_DEFAULT_QUEUE, settings.TRACES_QUEUE]
    celery_app.conf.task_always_eager = False
    for queue in queues:
        celery_app.control.cancel_consumer(queue, reply=True, timeout=2)
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2",
        "OTEL_SERVICE_NAME": "agentops-test",
        "AGENTOPS_OTEL_RETRY_BASE_SECONDS": "1",
        "AGENTOPS_OTEL_RETRY_MAX_SECONDS": "1",
        "AGENTOPS_OTEL_EXPORT_RETRIES": "600",
    }
    server = AsgiServer(tmp_path / "uvicorn.log", **env)
    worker = Worker(tmp_path / "worker.log", concurrency=2, purge=True, **env)
    yield server.url
    worker.stop()
    server.stop()
    for queue in queues:
        celery_app.control.add_consumer(queue, reply=True, timeout=2)
    celery_app.conf.task_always_eager = True


def approve_when_pending(reviewer: Client) -> threading.Thread:
    def loop() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pending = reviewer.pending_approvals()
            if pending:
                reviewer.approve(pending[0].id, "within policy")
                return
            time.sleep(0.1)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def turn(text: str) -> list[dict[str, object]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "On it."}]


def test_a_run_arrives_as_one_trace_after_the_collector_comes_back(traced, receiver, tmp_path):
    agent_user = make_user("otel-agent", "operator")
    reviewer_user = make_user("otel-reviewer", "reviewer")
    agent = Client(traced, make_token(agent_user), poll_interval=0.2)
    reviewer = Client(traced, make_token(reviewer_user), poll_interval=0.2)
    tracer = TracerProvider().get_tracer("the agent")
    # The collector is down from the start: nothing the run does waits for it.
    with tracer.start_as_current_span("agent handles ticket 42") as agent_span:
        run = agent.start_run(
            "Refund ticket 42",
            agent_name="refunds desk",
            agent_version="2.1.0",
            prompt={"content": PROMPT, "name": "refunds", "version": "v7"},
        )
        run.record_turn(
            turn("Refund my $60 ticket"),
            {"model": "gpt-4o", "input_tokens": 120, "output_tokens": 30, "cost_usd": 0.0012},
            model_parameters={"temperature": 0.2, "top_p": 0.9},
        )
        with tracer.start_as_current_span("agent calls issue_refund") as tool_call:
            step = agent.append_step(run.run_id, "issue_refund", {"amount": 60})
        approve_when_pending(reviewer).join(60)
        step = agent.wait_for_step(run.run_id, step.id, timeout=60)
        assert step.status == "ready"
        error = {"type": "BankTimeout", "message": "the bank timed out", "retryable": True}
        assert agent.report(run.run_id, step.id, error=error).status == "ready"
        assert agent.report(run.run_id, step.id, result={"refunded": 60}).status == "succeeded"
        run.record_turn(
            [{"role": "assistant", "content": "Refunded $60."}],
            {"model": "gpt-4o", "input_tokens": 200, "output_tokens": 10, "cost_usd": 0.0016},
        )
        run.complete()
        finished = run.wait_finished(timeout=60)
    agent_context = agent_span.get_span_context()
    # The run and its step finished while the receiver was down, and nothing reached it.
    assert finished.status == "succeeded"
    assert Step.objects.get(pk=step.id).status == StepStatus.SUCCEEDED
    assert receiver.received() == []
    # The worker tried, failed and keeps retrying (its log says so).
    wait_for(lambda: "Retry in" in (tmp_path / "worker.log").read_text(), timeout=60)
    assert receiver.received() == []

    receiver.start()
    wait_for(lambda: any(s.name.startswith("invoke_agent") for s in receiver.received()), 60)
    spans = receiver.received()
    trace_id = f"{agent_context.trace_id:032x}"
    assert {span.trace_id for span in spans} == {trace_id}
    by_name: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert sorted(by_name) == [
        "chat gpt-4o",
        "execute_tool issue_refund",
        "gate approval issue_refund",
        "invoke_agent refunds desk",
    ]
    (root,) = by_name["invoke_agent refunds desk"]
    (tool,) = by_name["execute_tool issue_refund"]
    (gate,) = by_name["gate approval issue_refund"]
    chats = by_name["chat gpt-4o"]
    db_run = Run.objects.select_related("prompt").get(pk=run.run_id)

    # The run's span continues the agent's span; the others hang below it.
    assert root.parent_span_id == f"{agent_context.span_id:016x}"
    assert root.span_id == f"{span_id_of('run', db_run.pk):016x}"
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "refunds desk"
    assert root.attributes["gen_ai.agent.version"] == "2.1.0"
    assert root.attributes["gen_ai.request.model"] == "gpt-4o"
    assert root.attributes["gen_ai.prompt.name"] == "refunds"
    assert root.attributes["agentops.prompt.version"] == "v7"
    assert root.attributes["agentops.prompt.sha256"] == db_run.prompt.sha256
    assert root.status == "STATUS_CODE_OK"
    assert root.resource["service.name"] == "agentops-test"

    # The step was appended inside the agent's own span of the call: its span hangs below it.
    assert tool.parent_span_id == f"{tool_call.get_span_context().span_id:016x}"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "issue_refund"
    assert tool.attributes["agentops.step.attempts"] == 2
    assert tool.events == [
        (
            "retry",
            {
                "agentops.attempt": 1,
                "agentops.worker": tool.events[0][1]["agentops.worker"],
                "error.type": "BankTimeout",
                "agentops.error.message": "the bank timed out",
            },
        )
    ]

    assert gate.parent_span_id == tool.span_id
    assert gate.attributes["agentops.approval.decision"] == "approved"
    assert gate.attributes["agentops.approval.reviewers"] == ["otel-reviewer"]
    assert gate.attributes["agentops.approval.decisions"] == ["approve"]
    assert gate.attributes["agentops.approval.wait_seconds"] > 0
    assert gate.end_ns - gate.start_ns == pytest.approx(
        gate.attributes["agentops.approval.wait_seconds"] * 1e9, abs=1000
    )

    assert [c.parent_span_id for c in chats] == [root.span_id] * 2
    assert [c.kind for c in chats] == ["SPAN_KIND_CLIENT"] * 2
    assert sorted(
        (
            c.attributes["gen_ai.usage.input_tokens"],
            c.attributes["gen_ai.usage.output_tokens"],
            c.attributes["agentops.usage.cost_usd"],
            c.attributes.get("gen_ai.request.temperature"),
        )
        for c in chats
    ) == [(120, 30, 0.0012, 0.2), (200, 10, 0.0016, 0.2)]
    assert {c.attributes["gen_ai.request.model"] for c in chats} == {"gpt-4o"}
    agent.close()
    reviewer.close()
