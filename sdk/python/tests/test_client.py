"""The SDK against a scripted server (httpx.MockTransport): retries keep their key, refusals
become typed errors, and a client step's outcome decides whether the local function runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from agentops_client import (
    AsyncClient,
    BadRequest,
    IdempotencyMismatch,
    Rejected,
    Retry,
    Run,
    ServerError,
    StepFailed,
    ToolFailed,
)
from agentops_client._protocol import call_key

FAST = Retry(attempts=4, base=0.0, cap=0.0)
RUN = "11111111-1111-1111-1111-111111111111"


def step_json(status: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": 7,
        "index": 0,
        "tool": "refund",
        "args": {"amount": 5},
        "executor": "client",
        "status": status,
        "attempts": 0,
        "idempotency_key": f"{RUN}:0:refund:abc",
        "result": None,
        "error": None,
        **extra,
    }


class Server:
    """A scripted agentops: ``answers`` maps (method, path) to a list of (status, body)
    served in turn (the last one repeats); every request is kept in ``seen``."""

    def __init__(self, answers: dict[tuple[str, str], list[tuple[int, Any]]]) -> None:
        self.answers = answers
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        queue = self.answers[(request.method, request.url.path)]
        status, body = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(body, Exception):
            raise body
        return httpx.Response(status, json=body)

    def client(self) -> AsyncClient:
        return AsyncClient(
            "http://agentops.test",
            "token",
            retry=FAST,
            websocket=False,
            poll_interval=0,
            transport=httpx.MockTransport(self),
        )


def posts(server: Server) -> list[httpx.Request]:
    return [r for r in server.seen if r.method == "POST"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_post_is_retried_with_the_same_key_on_network_errors_and_5xx():
    server = Server(
        {
            ("POST", "/api/v1/runs/"): [
                (0, httpx.ConnectError("refused")),
                (503, {"detail": "busy"}),
                (409, {"detail": "a request with this Idempotency-Key is still being processed"}),
                (201, {"id": RUN, "status": "queued", "goal": "g", "steps": []}),
            ]
        }
    )
    created = run(server.client().create_run("g"))
    assert created.id == RUN
    keys = {r.headers["Idempotency-Key"] for r in posts(server)}
    assert len(posts(server)) == 4
    assert len(keys) == 1


def test_a_run_is_created_in_the_project_named():
    answer = {"id": RUN, "status": "queued", "goal": "g", "project": "billing", "steps": []}
    server = Server({("POST", "/api/v1/runs/"): [(201, answer)]})
    created = run(server.client().create_run("g", project="billing"))
    assert json.loads(posts(server)[0].content)["project"] == "billing"
    assert created.project == "billing"


def test_refusals_are_typed_and_retries_give_up():
    server = Server(
        {
            ("POST", "/api/v1/runs/"): [(400, {"detail": "goal: required", "field": "goal"})],
            ("POST", f"/api/v1/runs/{RUN}/complete/"): [(500, {"detail": "boom"})],
            ("POST", f"/api/v1/runs/{RUN}/cancel/"): [(422, {"detail": "key reused"})],
        }
    )
    client = server.client()
    with pytest.raises(BadRequest) as bad:
        run(client.create_run(""))
    assert (bad.value.status, bad.value.field) == (400, "goal")
    with pytest.raises(ServerError):
        run(client.complete_run(RUN))
    assert len([r for r in posts(server) if r.url.path.endswith("/complete/")]) == FAST.attempts
    with pytest.raises(IdempotencyMismatch):
        run(client.cancel_run(RUN))


def test_append_keys_repeat_for_the_same_call_and_differ_for_another():
    first = call_key(RUN, 1, "refund", {"a": 1, "b": 2}, "")
    assert first == call_key(RUN, 1, "refund", {"b": 2, "a": 1}, "")
    assert first != call_key(RUN, 2, "refund", {"a": 1, "b": 2}, "")
    assert call_key(RUN, 9, "refund", {}, "call_1#1") == f"{RUN}:call:call_1#1"


def _script(*steps: dict[str, Any], report: Any = None) -> Server:
    answers: dict[tuple[str, str], list[tuple[int, Any]]] = {
        ("POST", f"/api/v1/runs/{RUN}/steps/"): [(201, steps[0])],
        ("GET", f"/api/v1/runs/{RUN}/steps/7/"): [(200, s) for s in steps[1:]] or [(200, steps[0])],
    }
    if report is not None:
        answers[("POST", f"/api/v1/runs/{RUN}/steps/7/result/")] = [(200, report)]
    return Server(answers)


def test_a_ready_step_runs_the_function_with_the_final_arguments_and_reports():
    edited = step_json("ready", args={"amount": 3})
    done = step_json("succeeded", args={"amount": 3}, result={"refunded": 3})
    server = _script(step_json("awaiting_approval"), edited, report=done)
    calls: list[int] = []

    def refund(amount: int) -> dict[str, int]:
        calls.append(amount)
        return {"refunded": amount}

    handle = server.client().resume(RUN)
    assert run(handle.call_tool("refund", {"amount": 5}, refund)) == {"refunded": 3}
    assert calls == [3]
    report = posts(server)[-1]
    assert json.loads(report.content) == {"result": {"refunded": 3}}


def test_a_rejected_step_returns_the_reason_without_running_the_function():
    error = {"type": "rejected", "reason": "too much", "message": "too much", "reviewer": "rita"}
    server = _script(step_json("awaiting_approval"), step_json("rejected", error=error))
    handle = server.client().resume(RUN)
    outcome = run(handle.call_tool("refund", {"amount": 5}, pytest.fail))
    assert outcome == Rejected("rejected", "too much", "too much", "rita")
    assert str(outcome) == "Rejected by rita: too much"
    assert not any(r.url.path.endswith("/result/") for r in server.seen)


def test_a_step_on_record_returns_its_result_without_running_the_function():
    server = _script(step_json("succeeded", result={"refunded": 5}))
    handle = server.client().resume(RUN)
    assert run(handle.call_tool("refund", {"amount": 5}, pytest.fail)) == {"refunded": 5}


def test_a_failing_function_reports_its_error_and_raises():
    failed = step_json("failed", error={"type": "ValueError", "message": "no card"})
    server = _script(step_json("ready"), report=failed)

    def refund(amount: int) -> None:
        raise ValueError("no card")

    with pytest.raises(ToolFailed) as raised:
        run(server.client().resume(RUN).call_tool("refund", {"amount": 5}, refund))
    assert isinstance(raised.value.__cause__, ValueError)
    body = json.loads(posts(server)[-1].content)
    assert body == {"error": {"type": "ValueError", "message": "no card", "retryable": False}}


def test_a_cancelled_step_raises_and_a_non_json_result_is_refused():
    server = _script(step_json("cancelled"))
    with pytest.raises(StepFailed):
        run(server.client().resume(RUN).call_tool("refund", {"amount": 5}, pytest.fail))
    failed = step_json("failed", error={"type": "TypeError", "message": "not JSON"})
    ready = _script(step_json("ready"), report=failed)
    with pytest.raises(ToolFailed, match="must be JSON"):
        run(ready.client().resume(RUN).call_tool("refund", {"amount": 5}, lambda amount: {1, 2}))
    assert json.loads(posts(ready)[-1].content)["error"]["type"] == "TypeError"


def test_an_answer_in_the_tools_error_form_is_reported_as_a_tool_error():
    refusal = "Error: payment amount does not add up"
    done = step_json("succeeded", result=refusal, tool_error=True)
    server = _script(step_json("ready"), report=done)

    def is_error(output: Any) -> bool:
        return isinstance(output, str) and output.startswith("Error:")

    handle = server.client().resume(RUN)
    outcome = run(
        handle.call_tool("refund", {"amount": 5}, lambda amount: refusal, error_when=is_error)
    )
    # The agent gets the answer; agentops gets it marked.
    assert outcome == refusal
    assert json.loads(posts(server)[-1].content) == {"result": refusal, "is_error": True}

    # An answer outside the error form is a plain result: no is_error sent (older servers
    # refuse the key).
    plain = _script(step_json("ready"), report=step_json("succeeded", result={"refunded": 5}))
    handle = plain.client().resume(RUN)
    run(
        handle.call_tool(
            "refund", {"amount": 5}, lambda amount: {"refunded": 5}, error_when=is_error
        )
    )
    assert json.loads(posts(plain)[-1].content) == {"result": {"refunded": 5}}

    step = run(server.client().report(RUN, 7, result=refusal, is_error=True))
    assert step.tool_error is True


def test_messages_are_read_in_pages_and_the_context_compacted():
    page = {"messages": [{"position": 7, "message": {"role": "user", "content": "hi"}}]}
    made = {"id": 1, "first": 1, "last": 5, "summary": "s"}
    server = Server(
        {
            ("GET", f"/api/v1/runs/{RUN}/messages/"): [(200, {**page, "message_count": 8})],
            ("GET", f"/api/v1/runs/{RUN}/context/"): [(200, {"messages": [], "tokens": 0})],
            ("POST", f"/api/v1/runs/{RUN}/compact/"): [(201, made)],
        }
    )
    client = server.client()
    assert run(client.messages(RUN, last=1, before=8))["message_count"] == 8
    assert dict(server.seen[-1].url.params) == {"last": "1", "before": "8"}
    assert run(client.context(RUN))["tokens"] == 0
    assert run(client.compact(RUN, "s", first=1, last=5)) == made
    assert run(client.compact(RUN)) == made
    bodies = [json.loads(r.content) for r in posts(server)]
    assert bodies == [{"summary": "s", "first": 1, "last": 5}, {}]


@pytest.mark.parametrize(
    ("status", "finished"),
    [
        ("running", False),
        ("failed", True),
        ("compensated", True),
        ("compensation_failed", True),
    ],
)
def test_a_compensated_run_has_finished(status, finished):
    run = Run.from_json({"id": "r1", "status": status, "goal": "g", "project": "default"})
    assert run.finished is finished
