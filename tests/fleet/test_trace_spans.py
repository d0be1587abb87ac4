"""A run's trace as ``fleet.traces`` builds and exports it: ids derived from the run and its
steps (a second export sends the very same spans), the trace of the client's ``traceparent``
continued (an invalid one ignored), retries as events, an export only for runs that ended,
and a collector that is down failing the export, never the run."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from fleet import tasks
from fleet.traces import ExportFailed, run_spans, run_trace_export, span_id_of
from runs.models import Run
from tests.api.conftest import RUNS_URL, calc, token_client
from testsupport.factories import plan_run
from testsupport.otlp import OtlpReceiver

pytestmark = pytest.mark.django_db

CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


def flaky(failures: int) -> dict[str, object]:
    return {"tool": "flaky", "args": {"failures": failures}}


@pytest.fixture
def receiver(monkeypatch):
    made = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", made.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    yield made
    made.stop()


def test_a_run_s_spans_have_ids_derived_from_the_run_and_its_steps(
    operator, django_capture_on_commit_callbacks
):
    run = plan_run(operator, [calc("6*7"), flaky(1)], capture=django_capture_on_commit_callbacks)
    assert run.status == "succeeded"
    first, second = run_spans(run.pk), run_spans(run.pk)
    steps = list(run.steps.order_by("index"))
    assert [(s.name, s.context.trace_id, s.context.span_id) for s in first] == [
        ("invoke_agent", run.pk.int, span_id_of("run", run.pk)),
        ("execute_tool calculate", run.pk.int, span_id_of("step", steps[0].pk)),
        ("execute_tool flaky", run.pk.int, span_id_of("step", steps[1].pk)),
    ]
    # The same spans again: same ids, times and attributes.
    assert [(s.context, s.parent, s.start_time, s.end_time, s.attributes) for s in second] == [
        (s.context, s.parent, s.start_time, s.end_time, s.attributes) for s in first
    ]
    root, calculate, retried = first
    assert root.parent is None
    assert calculate.parent == retried.parent == root.context
    assert calculate.attributes["gen_ai.tool.name"] == "calculate"
    assert calculate.events == ()
    (retry,) = retried.events
    assert retry.name == "retry"
    assert retry.attributes["agentops.attempt"] == 1
    assert retry.attributes["error.type"] == "tool_error"
    assert retry.attributes["agentops.error.message"] == "planned failure 1 of 1"
    assert retried.attributes["agentops.step.attempts"] == 2


@pytest.fixture
def operator_api(operator):
    return token_client(operator)


def test_a_traceparent_on_creation_puts_the_run_in_the_client_s_trace(operator_api):
    header = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    body = {"agent": "plan", "goal": "traced", "steps": [calc()]}
    made = operator_api.post(RUNS_URL, body, format="json", HTTP_TRACEPARENT=header)
    assert made.status_code == 201
    run = Run.objects.get(pk=made.json()["id"])
    assert run.trace_parent == header
    root = run_spans(run.pk)[0]
    assert f"{root.context.trace_id:032x}" == CLIENT_TRACE
    assert f"{root.parent.span_id:016x}" == CLIENT_SPAN
    assert root.context.span_id == span_id_of("run", run.pk)


def test_a_step_appended_with_a_traceparent_hangs_below_the_client_s_span(
    operator_api, django_capture_on_commit_callbacks
):
    created = operator_api.post(
        RUNS_URL,
        {"agent": "client", "goal": "traced"},
        format="json",
        HTTP_TRACEPARENT=f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01",
    ).json()
    tool_span = "00f067aa0ba902b7"
    other_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    for header in (f"00-{CLIENT_TRACE}-{tool_span}-01", f"00-{other_trace}-{tool_span}-01"):
        with django_capture_on_commit_callbacks(execute=True):
            appended = operator_api.post(
                f"{RUNS_URL}{created['id']}/steps/",
                {"tool": "calculate", "args": {"expression": "1+1"}},
                format="json",
                HTTP_TRACEPARENT=header,
            )
        assert appended.status_code == 201, appended.content
    root, same_trace, other = run_spans(Run.objects.get(pk=created["id"]).pk)
    assert f"{same_trace.parent.span_id:016x}" == tool_span
    assert same_trace.links == ()
    # A client span of another trace cannot be a parent here: the step links to it.
    assert other.parent == root.context
    (link,) = other.links
    assert f"{link.context.trace_id:032x}" == other_trace


@pytest.mark.parametrize(
    "header",
    [
        f"00-{'0' * 32}-{CLIENT_SPAN}-01",
        f"00-{CLIENT_TRACE}-{'0' * 16}-01",
        f"00-{CLIENT_TRACE[:-1]}-{CLIENT_SPAN}-01",
        "not a traceparent",
    ],
)
def test_an_invalid_traceparent_is_ignored_and_the_run_starts_its_own_trace(operator_api, header):
    body = {"agent": "plan", "goal": "traced", "steps": [calc()]}
    made = operator_api.post(RUNS_URL, body, format="json", HTTP_TRACEPARENT=header)
    assert made.status_code == 201
    run = Run.objects.get(pk=made.json()["id"])
    assert run.trace_parent == ""
    root = run_spans(run.pk)[0]
    assert (root.context.trace_id, root.parent) == (run.pk.int, None)


def test_an_export_is_sent_for_runs_that_ended_only(
    operator, monkeypatch, django_capture_on_commit_callbacks
):
    sent: list[tuple[str, ...]] = []
    monkeypatch.setattr(
        tasks.export_run_trace, "apply_async", lambda args=(), **options: sent.append(args)
    )
    done = plan_run(operator, [calc()], capture=django_capture_on_commit_callbacks)
    waiting = plan_run(
        operator,
        [{"tool": "send_email", "args": {"to": ["a@example.com"], "subject": "s", "body": "b"}}],
        capture=django_capture_on_commit_callbacks,
    )
    assert (done.status, waiting.status) == ("succeeded", "waiting")
    tasks.export_finished_runs(list(AuditEvent.objects.filter(run_id=waiting.pk)))
    assert sent == []
    tasks.export_finished_runs(list(AuditEvent.objects.filter(run_id=done.pk)))
    assert sent == [(str(done.pk),)]


def test_a_re_export_sends_the_same_spans(receiver, operator, django_capture_on_commit_callbacks):
    run = plan_run(operator, [calc(), flaky(1)], capture=django_capture_on_commit_callbacks)
    receiver.start()
    assert run_trace_export(run_id=run.pk) == 3
    first = receiver.received()
    assert run_trace_export(run_id=run.pk) == 3
    assert receiver.received() == first + first
    assert {span.trace_id for span in first} == {f"{run.pk.int:032x}"}


def test_a_collector_that_is_down_fails_the_export_not_the_run(
    receiver, operator, django_capture_on_commit_callbacks
):
    run = plan_run(operator, [calc()], capture=django_capture_on_commit_callbacks)
    with pytest.raises(ExportFailed):
        run_trace_export(run_id=run.pk)
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    receiver.start()
    assert run_trace_export(run_id=run.pk) == 2
    assert [span.name for span in receiver.received()] == ["invoke_agent", "execute_tool calculate"]
