"""Client-run tools over the API: a step the client runs itself is ``ready`` once its gate lets
it through, its report settles the tool-call ledger, a repeat is answered the same and a
different report is refused without a trace."""

from __future__ import annotations

from typing import Any

import pytest

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from runs.control.create import run_create
from runs.models import Run, RunStatus, Step, StepAttempt, StepStatus, ToolCall
from tests.api.conftest import approval_url, run_url, token_client
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

CANCEL_SCHEMA = {
    "type": "object",
    "properties": {"reservation_id": {"type": "string", "minLength": 6, "maxLength": 6}},
    "required": ["reservation_id"],
    "additionalProperties": False,
}


@pytest.fixture
def api(operator):
    return token_client(operator)


@pytest.fixture
def reviewer_api(reviewer):
    return token_client(reviewer)


@pytest.fixture
def run(operator, django_capture_on_commit_callbacks) -> Run:
    return make_run(
        operator, agent="client", goal="airline desk", capture=django_capture_on_commit_callbacks
    )


def step_url(run: Run, step_id: int, action: str = "") -> str:
    return run_url(run.pk, f"steps/{step_id}" + (f"/{action}" if action else ""))


def append(api, run: Run, capture, tool: str, args: dict[str, Any], **extra: Any) -> dict:
    with capture(execute=True):
        response = api.post(
            run_url(run.pk, "steps"),
            {"tool": tool, "args": args, "executor": "client", **extra},
            format="json",
        )
    assert response.status_code == 201, response.json()
    return api.get(step_url(run, response.json()["id"])).json()


def report(api, run: Run, step_id: int, body: dict[str, Any], capture, **headers: str):
    with capture(execute=True):
        return api.post(step_url(run, step_id, "result"), body, format="json", **headers)


def test_a_low_risk_client_step_is_ready_and_its_result_settles_the_ledger(
    api, run, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    step = append(api, run, capture, "get_reservation_details", {"reservation_id": "ABC123"})
    assert step["status"] == "ready"
    assert step["executor"] == "client"
    assert step["idempotency_key"].startswith(f"{run.pk}:0:get_reservation_details:")
    # Nobody ran it: no attempt, no ledger row, until the client reports.
    assert not StepAttempt.objects.filter(step_id=step["id"]).exists()
    assert not ToolCall.objects.filter(step_id=step["id"]).exists()

    result = {"reservation_id": "ABC123", "status": "confirmed"}
    response = report(api, run, step["id"], {"result": result}, capture)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["status"], body["result"], body["attempts"]) == ("succeeded", result, 1)
    call = ToolCall.objects.get(idempotency_key=step["idempotency_key"])
    assert (call.status, call.result, call.attempt) == ("succeeded", result, 1)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert run.state["last_step"]["result"] == result

    # The same report again (another request, no Idempotency-Key): the step as it is.
    again = report(api, run, step["id"], {"result": result}, capture)
    assert (again.status_code, again.json()) == (200, body)
    # A different report for the settled step: refused, nothing changes.
    with assert_unchanged():
        other = report(api, run, step["id"], {"result": {"status": "cancelled"}}, capture)
    assert other.status_code == 409
    assert "different report" in other.json()["detail"]


def test_a_high_risk_client_step_waits_for_approval_and_gets_the_edited_arguments(
    api, reviewer_api, run, reviewer, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    step = append(
        api,
        run,
        capture,
        "cancel_reservation",
        {"reservation_id": "ABC123"},
        args_schema=CANCEL_SCHEMA,
    )
    assert step["status"] == "awaiting_approval"
    # The client may not run it before a reviewer says yes.
    with assert_unchanged():
        early = report(api, run, step["id"], {"result": "ok"}, capture)
    assert early.status_code == 409
    assert "awaiting_approval" in early.json()["detail"]

    approval = ApprovalRequest.objects.get(step_id=step["id"])
    # An edit that fails the client's schema is refused with what is wrong.
    with assert_unchanged():
        bad = reviewer_api.post(
            approval_url(approval.pk, "approve"),
            {"args": {"reservation_id": "TOO-LONG-1"}},
            format="json",
        )
    assert bad.status_code == 400
    assert "reservation_id" in bad.json()["detail"]
    with capture(execute=True):
        good = reviewer_api.post(
            approval_url(approval.pk, "approve"),
            {"args": {"reservation_id": "XYZ789"}, "comment": "the customer meant XYZ789"},
            format="json",
        )
    assert good.status_code == 200, good.json()
    ready = api.get(step_url(run, step["id"])).json()
    assert ready["status"] == "ready"
    assert ready["args"] == {"reservation_id": "XYZ789"}
    assert ready["idempotency_key"] != step["idempotency_key"]
    done = report(api, run, step["id"], {"result": "cancelled XYZ789"}, capture)
    assert done.json()["status"] == "succeeded"
    assert ToolCall.objects.get(idempotency_key=ready["idempotency_key"]).result == (
        "cancelled XYZ789"
    )
    assert not ToolCall.objects.filter(idempotency_key=step["idempotency_key"]).exists()


def test_a_rejected_client_step_gives_the_reason_and_cannot_be_reported(
    api, reviewer_api, run, reviewer, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    step = append(api, run, capture, "cancel_reservation", {"reservation_id": "ABC123"})
    approval = ApprovalRequest.objects.get(step_id=step["id"])
    with capture(execute=True):
        reviewer_api.post(
            approval_url(approval.pk, "reject"), {"comment": "not refundable"}, format="json"
        )
    rejected = api.get(step_url(run, step["id"])).json()
    assert rejected["status"] == "rejected"
    assert rejected["error"] == {
        "type": "rejected",
        "reason": "not refundable",
        "message": "not refundable",
        "reviewer": reviewer.username,
    }
    with assert_unchanged():
        late = report(api, run, step["id"], {"result": "cancelled anyway"}, capture)
    assert late.status_code == 409
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_a_retryable_error_hands_the_step_back_and_a_final_one_fails_the_run(
    api, run, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    step = append(api, run, capture, "get_flight_status", {"flight": "HAT001"})
    timeout = {"type": "Timeout", "message": "the airline API timed out", "retryable": True}
    first = report(api, run, step["id"], {"error": timeout}, capture).json()
    assert (first["status"], first["attempts"], first["error"]) == ("ready", 1, timeout)
    assert ToolCall.objects.get(idempotency_key=step["idempotency_key"]).status == "failed"
    broken = {"type": "ValueError", "message": "no such flight", "retryable": False}
    second = report(api, run, step["id"], {"error": broken}, capture).json()
    assert (second["status"], second["attempts"]) == ("failed", 2)
    assert second["error"]["type"] == "ValueError"
    assert [a["status"] for a in second["attempt_history"]] == ["failed", "failed"]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert (run.error["step"], run.error["tool"]) == (0, "get_flight_status")

    # An operator resumes: the client step is ready again, under the same key.
    with capture(execute=True):
        resumed = api.post(run_url(run.pk, "resume"), {}, format="json")
    assert resumed.status_code == 200
    again = api.get(step_url(run, step["id"])).json()
    assert (again["status"], again["idempotency_key"]) == ("ready", step["idempotency_key"])
    done = report(api, run, step["id"], {"result": {"status": "on time"}}, capture).json()
    assert (done["status"], done["attempts"]) == ("succeeded", 3)


def test_an_unknown_outcome_is_never_repeated_unasked(api, run, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    step = append(api, run, capture, "get_quote", {"amount": 10})
    body = report(api, run, step["id"], {"outcome": "unknown"}, capture).json()
    assert body["status"] == "failed"
    assert body["error"]["type"] == "outcome_unknown"
    # The ledger keeps the call open: its effect may have happened.
    assert ToolCall.objects.get(idempotency_key=step["idempotency_key"]).status == "started"
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_the_workers_never_run_a_client_step(api, run, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    # "echo" is a registered server tool: as a client step the client runs it, not a worker.
    step = append(api, run, capture, "echo", {"value": 1})
    from runs.executor.entry import step_execute

    step_execute(step_id=step["id"], actor=Actor.worker())
    stored = Step.objects.get(pk=step["id"])
    assert (stored.status, stored.attempts, stored.result) == (StepStatus.READY, 0, None)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "result"),
        ({"result": 1, "error": {"type": "x", "message": "", "retryable": False}}, "result"),
        ({"error": {"type": "x", "message": "m"}}, "error"),
        ({"error": {"type": "x", "message": "m", "retryable": "yes"}}, "error"),
        ({"error": {"type": "", "message": "m", "retryable": False}}, "error"),
        ({"outcome": "maybe"}, "outcome"),
        ({"result": "x" * 1_000_001}, "result"),
        ({"result": 1, "extra": 2}, "extra"),
    ],
)
def test_a_malformed_report_is_refused_with_what_is_wrong(
    api, run, body, field, django_capture_on_commit_callbacks
):
    step = append(api, run, django_capture_on_commit_callbacks, "get_quote", {"amount": 1})
    with assert_unchanged():
        response = api.post(step_url(run, step["id"], "result"), body, format="json")
    assert response.status_code == 400, response.json()
    assert field in str(response.json())


def test_bad_appends_and_wrong_callers_are_refused(
    api, reviewer_api, run, operator, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    with assert_unchanged():
        not_schema = api.post(
            run_url(run.pk, "steps"),
            {"tool": "t", "args": {}, "executor": "client", "args_schema": {"type": 12}},
            format="json",
        )
        fails_schema = api.post(
            run_url(run.pk, "steps"),
            {
                "tool": "t",
                "args": {"reservation_id": 5},
                "executor": "client",
                **{"args_schema": CANCEL_SCHEMA},
            },
            format="json",
        )
        server_schema = api.post(
            run_url(run.pk, "steps"),
            {"tool": "echo", "args": {"value": 1}, "args_schema": CANCEL_SCHEMA},
            format="json",
        )
        unknown_executor = api.post(
            run_url(run.pk, "steps"),
            {"tool": "echo", "args": {"value": 1}, "executor": "browser"},
            format="json",
        )
    assert [r.status_code for r in (not_schema, fails_schema, server_schema)] == [400] * 3
    assert unknown_executor.status_code == 400
    assert "args_schema" in not_schema.json()["detail"]
    assert "reservation_id" in fails_schema.json()["detail"]

    own = append(api, run, capture, "get_quote", {"amount": 1})
    with capture(execute=True):
        server = api.post(
            run_url(run.pk, "steps"), {"tool": "echo", "args": {"value": 1}}, format="json"
        ).json()
    other = run_create(actor=Actor.for_user(operator), agent="client", goal="other")
    with assert_unchanged():
        by_reviewer = reviewer_api.post(
            step_url(run, own["id"], "result"), {"result": 1}, format="json"
        )
        wrong_run = api.post(
            run_url(other.pk, f"steps/{own['id']}/result"), {"result": 1}, format="json"
        )
        for_server_step = api.post(
            step_url(run, server["id"], "result"), {"result": 1}, format="json"
        )
    assert by_reviewer.status_code == 403
    assert wrong_run.status_code == 404
    assert for_server_step.status_code == 400
    assert api.get(run_url(other.pk, f"steps/{own['id']}")).status_code == 404
    huge = 10**30
    assert api.get(step_url(run, huge)).status_code == 404
    assert api.post(step_url(run, huge, "result"), {"result": 1}, format="json").status_code == 404
