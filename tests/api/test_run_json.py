"""The exact JSON of a created run and of a run's detail, byte for byte, and the same bytes as
DRF's own serializer code renders on every read endpoint (``agentops.serializers``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers

from agentops.serializers import FieldsBuiltOnce
from approvals.models import ApprovalRequest
from runs.models import Run, Step, StepAttempt
from tests.api.conftest import (
    APPROVALS_URL,
    RUNS_URL,
    approval_url,
    calc,
    email_step,
    plan_body,
    post_run,
    run_url,
)

pytestmark = pytest.mark.django_db

# The SHA-256 of each step's arguments, the end of its idempotency key.
CALC_HASH = "c831f0223a5058e3051f39f6f1b077511f6c2519b4c50e35c84888f9b00ae9e6"
FLAKY_HASH = "bb37527c1e39963e8c3a9b72be419fbe5bbb846c03403c335cec28a9d6c9cbae"
EMAIL_HASH = "680c610f5702409ac39ddfd66ba93a08f7c6eb8039f610db35f50bf465b7c62c"
SEVEN_HASH = "1ba48434ac6dc9249d6faf82d447d669267b62b269ad8f0657979cdf6ca9d5da"


def at(second: int, microsecond: int = 0) -> datetime:
    return datetime(2026, 3, 4, 5, 6, second, microsecond, tzinfo=UTC)


def assert_renders(response: Any, expected: dict[str, Any]) -> None:
    """``response`` is ``expected``, and its body is ``expected`` rendered as DRF's JSON
    renderer renders it (compact, key order kept): ``0.0`` differs from ``0`` here."""
    assert response.json() == expected
    body = json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
    assert response.content.decode() == body


def test_a_created_run_answers_exactly_this(operator_api, monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: at(7, 890123))
    body = plan_body({**calc("2+3"), "rationale": "add"}, email_step(), goal="pinned")
    body["metadata"] = {"ticket": "T-9", "tags": ["a", "b"]}
    body["deadline"] = "2026-03-05T00:00:00+02:00"
    body["budget"] = {"max_tokens": 1000, "max_cost_usd": 2.5, "on_exceed": "approve"}
    body["agent_name"], body["agent_version"], body["model"] = "desk", "1.4.0", "gpt-4o"
    body["prompt"] = {"content": "Be brief.", "name": "policy", "version": "v3"}
    body["model_parameters"] = {"temperature": 0.2}
    response = post_run(operator_api, **body)
    assert response.status_code == 201
    run = Run.objects.get()
    calc_id, email_id = Step.objects.filter(run=run).order_by("index").values_list("pk", flat=True)
    step = {
        "timeout_seconds": 60,
        "next_attempt_at": None,
        "executor": "server",
        "args_schema": {},
        "result": None,
        "tool_error": False,
        "error": None,
        "usage": {},
        "budget_crossing": None,
        "policy_version": 0,
    }
    pending = {
        "approval": None,
        "created_at": "2026-03-04T05:06:07.890123Z",
        "started_at": None,
        "finished_at": None,
        "duration_ms": None,
        "attempt_history": [],
    }
    assert_renders(
        response,
        {
            "id": str(run.pk),
            "status": "queued",
            "agent": "plan",
            "goal": "pinned",
            "project": "default",
            "requested_by": "olivia",
            "created_at": "2026-03-04T05:06:07.890123Z",
            "updated_at": "2026-03-04T05:06:07.890123Z",
            "started_at": None,
            "finished_at": None,
            "error": None,
            "metadata": {"ticket": "T-9", "tags": ["a", "b"]},
            "step_limit": 500,
            "deadline": "2026-03-04T22:00:00Z",
            "budget": {
                "max_tokens": 1000,
                "max_cost_usd": 2.5,
                "max_steps": 500,
                "deadline": "2026-03-04T22:00:00+00:00",
                "on_exceed": "approve",
                "grants": 0,
            },
            "client_done": False,
            "on_failure": "stop",
            "compensating": False,
            "usage_tokens": 0,
            "cost_usd": 0.0,
            "duration_ms": 0,
            "version": 0,
            "agent_name": "desk",
            "agent_version": "1.4.0",
            "prompt": {
                "sha256": "213c22ed7234eb11116e1e88f314c73cb3a019b5c87fe224b6ce5665bd9ec50e",
                "name": "policy",
                "version": "v3",
            },
            "model": "gpt-4o",
            "model_parameters": {"temperature": 0.2},
            "conversation": [],
            "message_count": 0,
            "context_tokens": 0,
            "state": {},
            "steps": [
                {
                    "id": calc_id,
                    "index": 0,
                    "tool": "calculate",
                    "args": {"expression": "2+3"},
                    "risk": "low",
                    "required_approvals": 0,
                    "status": "pending",
                    "attempts": 0,
                    "max_attempts": 3,
                    **step,
                    "rationale": "add",
                    "idempotency_key": f"{run.pk}:0:calculate:{CALC_HASH}",
                    "compensates": None,
                    **pending,
                },
                {
                    "id": email_id,
                    "index": 1,
                    "tool": "send_email",
                    "args": {"to": ["a@example.com"], "subject": "hi", "body": "x"},
                    "risk": "high",
                    "required_approvals": 1,
                    "status": "pending",
                    "attempts": 0,
                    "max_attempts": 1,
                    **step,
                    "rationale": "tell the customer",
                    "idempotency_key": f"{run.pk}:1:send_email:{EMAIL_HASH}",
                    "compensates": None,
                    **pending,
                },
            ],
        },
    )


@pytest.fixture
def rejected_run(operator_api, reviewer_api, django_capture_on_commit_callbacks) -> Run:
    """A run whose steps succeeded (``calculate``), succeeded on a second attempt (``flaky``),
    were rejected by a reviewer (``send_email``) and skipped, with every time, worker and
    total then set to fixed values."""
    steps = [calc("2+3"), {"tool": "flaky", "args": {"failures": 1}}, email_step(), calc("7")]
    with django_capture_on_commit_callbacks(execute=True):
        created = post_run(operator_api, **plan_body(*steps, goal="pinned detail")).json()
    approval = ApprovalRequest.objects.get(step__run_id=created["id"])
    with django_capture_on_commit_callbacks(execute=True):
        rejected = reviewer_api.post(approval_url(approval.pk, "reject"), {"comment": "no"})
    assert rejected.status_code == 200
    runs = Run.objects.filter(pk=created["id"])
    runs.update(
        created_at=at(7),
        updated_at=at(20, 500),
        started_at=at(8, 1),
        finished_at=at(19, 999999),
        usage_tokens=150,
        cost_usd=Decimal("0.012345"),
        duration_ms=26,
    )
    steps_of = Step.objects.filter(run_id=created["id"])
    steps_of.update(created_at=at(7, 100))
    steps_of.filter(index=0).update(started_at=at(9), finished_at=at(9, 10000))
    steps_of.filter(index=1).update(started_at=at(11), finished_at=at(11, 16500))
    steps_of.filter(index=2).update(finished_at=at(19, 5))
    attempts = StepAttempt.objects.filter(step__run_id=created["id"])
    attempts.update(worker="w1:42", duration_ms=10)
    attempts.filter(step__index=0).update(started_at=at(9), finished_at=at(9, 10000))
    attempts.filter(step__index=1, number=1).update(
        started_at=at(10),
        finished_at=at(10, 12000),
        error={"type": "tool_error", "message": "planned failure 1 of 1", "retryable": True},
    )
    attempts.filter(step__index=1, number=2).update(started_at=at(11), finished_at=at(11, 16500))
    return runs.get()


def test_a_run_s_detail_answers_exactly_this(operator_api, rejected_run):
    run = rejected_run
    step_ids = list(Step.objects.filter(run=run).order_by("index").values_list("pk", flat=True))
    approval = ApprovalRequest.objects.get(step__run=run)
    step = {
        "timeout_seconds": 60,
        "next_attempt_at": None,
        "executor": "server",
        "args_schema": {},
    }
    after_result = {"usage": {}, "budget_crossing": None, "policy_version": 0}
    rejection = {"type": "rejected", "reason": "no", "message": "no", "reviewer": "rita"}
    assert_renders(
        operator_api.get(run_url(run.pk)),
        {
            "id": str(run.pk),
            "status": "failed",
            "agent": "plan",
            "goal": "pinned detail",
            "project": "default",
            "requested_by": "olivia",
            "created_at": "2026-03-04T05:06:07Z",
            "updated_at": "2026-03-04T05:06:20.000500Z",
            "started_at": "2026-03-04T05:06:08.000001Z",
            "finished_at": "2026-03-04T05:06:19.999999Z",
            "error": {"step": 2, "tool": "send_email", **rejection},
            "metadata": {},
            "step_limit": 500,
            "deadline": None,
            "budget": {
                "max_tokens": None,
                "max_cost_usd": None,
                "max_steps": 500,
                "deadline": None,
                "on_exceed": "fail",
                "grants": 0,
            },
            "client_done": False,
            "on_failure": "stop",
            "compensating": False,
            "usage_tokens": 150,
            "cost_usd": 0.012345,
            "duration_ms": 26,
            "version": 6,
            "agent_name": "",
            "agent_version": "",
            "prompt": None,
            "model": "",
            "model_parameters": {},
            "conversation": [],
            "message_count": 0,
            "context_tokens": 0,
            "state": {
                "last_step": {"tool": "flaky", "index": 1, "result": "ok"},
                "completed_steps": 2,
            },
            "steps": [
                {
                    "id": step_ids[0],
                    "index": 0,
                    "tool": "calculate",
                    "args": {"expression": "2+3"},
                    "risk": "low",
                    "required_approvals": 0,
                    "status": "succeeded",
                    "attempts": 1,
                    "max_attempts": 3,
                    **step,
                    "result": 5.0,
                    "tool_error": False,
                    "error": None,
                    **after_result,
                    "rationale": "",
                    "idempotency_key": f"{run.pk}:0:calculate:{CALC_HASH}",
                    "compensates": None,
                    "approval": None,
                    "created_at": "2026-03-04T05:06:07.000100Z",
                    "started_at": "2026-03-04T05:06:09Z",
                    "finished_at": "2026-03-04T05:06:09.010000Z",
                    "duration_ms": 10,
                    "attempt_history": [
                        {
                            "number": 1,
                            "status": "succeeded",
                            "worker": "w1:42",
                            "started_at": "2026-03-04T05:06:09Z",
                            "finished_at": "2026-03-04T05:06:09.010000Z",
                            "duration_ms": 10,
                            "error": None,
                        }
                    ],
                },
                {
                    "id": step_ids[1],
                    "index": 1,
                    "tool": "flaky",
                    "args": {"failures": 1},
                    "risk": "low",
                    "required_approvals": 0,
                    "status": "succeeded",
                    "attempts": 2,
                    "max_attempts": 5,
                    **step,
                    "result": "ok",
                    "tool_error": False,
                    "error": None,
                    **after_result,
                    "rationale": "",
                    "idempotency_key": f"{run.pk}:1:flaky:{FLAKY_HASH}",
                    "compensates": None,
                    "approval": None,
                    "created_at": "2026-03-04T05:06:07.000100Z",
                    "started_at": "2026-03-04T05:06:11Z",
                    "finished_at": "2026-03-04T05:06:11.016500Z",
                    "duration_ms": 16,
                    "attempt_history": [
                        {
                            "number": 1,
                            "status": "failed",
                            "worker": "w1:42",
                            "started_at": "2026-03-04T05:06:10Z",
                            "finished_at": "2026-03-04T05:06:10.012000Z",
                            "duration_ms": 10,
                            "error": {
                                "type": "tool_error",
                                "message": "planned failure 1 of 1",
                                "retryable": True,
                            },
                        },
                        {
                            "number": 2,
                            "status": "succeeded",
                            "worker": "w1:42",
                            "started_at": "2026-03-04T05:06:11Z",
                            "finished_at": "2026-03-04T05:06:11.016500Z",
                            "duration_ms": 10,
                            "error": None,
                        },
                    ],
                },
                {
                    "id": step_ids[2],
                    "index": 2,
                    "tool": "send_email",
                    "args": {"to": ["a@example.com"], "body": "x", "subject": "hi"},
                    "risk": "high",
                    "required_approvals": 1,
                    "status": "rejected",
                    "attempts": 0,
                    "max_attempts": 1,
                    **step,
                    "result": None,
                    "tool_error": False,
                    "error": rejection,
                    **after_result,
                    "rationale": "tell the customer",
                    "idempotency_key": f"{run.pk}:2:send_email:{EMAIL_HASH}",
                    "compensates": None,
                    "approval": {"id": approval.pk, "status": "rejected"},
                    "created_at": "2026-03-04T05:06:07.000100Z",
                    "started_at": None,
                    "finished_at": "2026-03-04T05:06:19.000005Z",
                    "duration_ms": None,
                    "attempt_history": [],
                },
                {
                    "id": step_ids[3],
                    "index": 3,
                    "tool": "calculate",
                    "args": {"expression": "7"},
                    "risk": "low",
                    "required_approvals": 0,
                    "status": "skipped",
                    "attempts": 0,
                    "max_attempts": 3,
                    **step,
                    "result": None,
                    "tool_error": False,
                    "error": None,
                    **after_result,
                    "rationale": "",
                    "idempotency_key": f"{run.pk}:3:calculate:{SEVEN_HASH}",
                    "compensates": None,
                    "approval": None,
                    "created_at": "2026-03-04T05:06:07.000100Z",
                    "started_at": None,
                    "finished_at": None,
                    "duration_ms": None,
                    "attempt_history": [],
                },
            ],
        },
    )


def test_every_read_renders_what_drf_s_own_serializer_code_renders(
    operator_api, reviewer_api, rejected_run, monkeypatch
):
    run = rejected_run
    urls = [
        run_url(run.pk),
        RUNS_URL,
        run_url(run.pk, f"steps/{Step.objects.get(run=run, index=1).pk}"),
        APPROVALS_URL,
        approval_url(ApprovalRequest.objects.get(step__run=run).pk),
    ]
    ours = [reviewer_api.get(url) for url in urls]

    def drf_fields(self: FieldsBuiltOnce) -> Any:
        return super(FieldsBuiltOnce, self).get_fields()

    def drf_representation(self: FieldsBuiltOnce, instance: Any) -> Any:
        return serializers.Serializer.to_representation(self, instance)

    monkeypatch.setattr(FieldsBuiltOnce, "get_fields", drf_fields)
    monkeypatch.setattr(FieldsBuiltOnce, "to_representation", drf_representation)
    drf = [reviewer_api.get(url) for url in urls]
    assert [r.status_code for r in ours] == [200] * len(urls)
    assert [r.content for r in ours] == [r.content for r in drf]
