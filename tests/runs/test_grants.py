"""Tool grants: a call outside the grants in force (the run's, its token's, its session's, its
project's) ends ``refused`` with ``not_granted`` before any gate, and its tool is never
called. A plan or transcript run fails on it; a client run goes on with the reason. Every
refusal changes nothing beyond its own records: the refused step, the run's outcome and
their audit events."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from agentops.actors import Actor
from agentops.errors import InvalidInput
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from audit.models import AuditEvent
from projects.services import project_default
from runs.control.create import run_create, step_append
from runs.control.sessions import session_create
from runs.models import Run, RunStatus, Step, StepAttempt, StepStatus, ToolCall
from runs.policy import project_grant_set
from testsupport.factories import send_email_step
from testsupport.state import assert_unchanged, snapshot

pytestmark = pytest.mark.django_db

CALC_ONLY = {"tools": ["calculate", "echo"]}


def new_rows(before: dict[str, list[Any]], after: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The rows ``after`` holds that ``before`` did not, by model, and an entry ``changed``
    naming the models whose earlier rows changed."""
    found: dict[str, list[Any]] = {"changed": []}
    for name, rows in before.items():
        old = {row["id"]: row for row in rows}
        added = [row for row in after[name] if row["id"] not in old]
        if added:
            found[name] = added
        if any(row["id"] in old and row != old[row["id"]] for row in after[name]):
            found["changed"].append(name)
    return found


def verbs(events: list[dict[str, Any]]) -> list[str]:
    return [event["verb"] for event in events]


def test_a_plan_run_fails_on_a_call_outside_its_grant_and_the_tool_is_never_called(
    operator, django_capture_on_commit_callbacks
):
    before = snapshot()
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="mail after a sum",
            steps=[
                {"tool": "calculate", "args": {"expression": "1+1"}},
                send_email_step(),
                {"tool": "echo", "args": {"value": 1}},
            ],
            grant=CALC_ONLY,
        )
    run.refresh_from_db()
    steps = list(run.steps.order_by("index"))
    assert [s.status for s in steps] == ["succeeded", "refused", "skipped"]
    assert steps[1].error["type"] == "not_granted"
    assert "send_email is not among the granted tools" in steps[1].error["reason"]
    assert run.status == RunStatus.FAILED
    assert (run.error["type"], run.error["step"], run.error["tool"]) == (
        "not_granted",
        1,
        "send_email",
    )
    # Never called, never gated: no mail, no attempt or ledger row, no approval request
    # (send_email is high risk: it would have waited for a reviewer).
    assert mail.outbox == []
    assert not StepAttempt.objects.filter(step__in=steps[1:]).exists()
    assert not ToolCall.objects.filter(step__in=steps[1:]).exists()
    assert not ApprovalRequest.objects.exists()
    added = new_rows(before, snapshot())
    assert set(added) - {"changed"} == {
        "Run",
        "Step",
        "StepAttempt",
        "ToolCall",
        "Checkpoint",
        "AuditEvent",
    }
    assert [row["step_id"] for row in added["ToolCall"]] == [steps[0].pk]
    step_events = [e for e in added["AuditEvent"] if e["object_id"] == str(steps[1].pk)]
    assert verbs(step_events) == ["step.created", "step.refused"]


def test_a_client_call_outside_the_grant_is_refused_and_the_run_goes_on(
    operator, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    capture = django_capture_on_commit_callbacks
    with capture(execute=True):
        run = run_create(actor=actor, agent="client", goal="chat", grant=CALC_ONLY)
    before = snapshot()
    with capture(execute=True):
        refused = step_append(actor=actor, run_id=run.pk, tool="send_email", args=_email())
    after = snapshot()
    assert (refused.status, refused.error["type"]) == (StepStatus.REFUSED, "not_granted")
    assert mail.outbox == []
    added = new_rows(before, after)
    # Only the refused step and its two audit events; the run is running still, with only
    # its version moved on (a step was appended).
    assert added["changed"] == ["Run"]
    (old_run,), (new_run,) = before["Run"], after["Run"]
    moved = {key for key in new_run if new_run[key] != old_run[key]}
    assert moved <= {"version", "updated_at"}
    assert new_run["status"] == RunStatus.RUNNING
    assert set(added) == {"changed", "Step", "AuditEvent"}
    assert [row["status"] for row in added["Step"]] == ["refused"]
    assert verbs(added["AuditEvent"]) == ["step.created", "step.refused"]
    # The agent replans: its next, granted call runs.
    with capture(execute=True):
        done = step_append(actor=actor, run_id=run.pk, tool="calculate", args={"expression": "2*3"})
    done.refresh_from_db()
    assert (done.status, done.result) == (StepStatus.SUCCEEDED, 6.0)
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def _email(amount: int = 10) -> dict[str, Any]:
    return {"to": ["a@example.com"], "subject": f"refund {amount}", "body": "x"}


def test_argument_constraints_use_the_rule_condition_language(
    operator, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    capture = django_capture_on_commit_callbacks
    grant = {"tools": ["calculate"], "constraints": {"calc*": "len(expression) <= 3"}}
    with capture(execute=True):
        run = run_create(actor=actor, agent="client", goal="small sums", grant=grant)
        short = step_append(
            actor=actor, run_id=run.pk, tool="calculate", args={"expression": "1+2"}
        )
    with capture(execute=True):
        long = step_append(
            actor=actor, run_id=run.pk, tool="calculate", args={"expression": "100+200"}
        )
    short.refresh_from_db()
    assert short.status == StepStatus.SUCCEEDED
    assert long.status == StepStatus.REFUSED
    assert "len(expression) <= 3" in long.error["reason"]
    assert not ToolCall.objects.filter(step=long).exists()


def test_the_effective_grant_is_the_intersection_of_token_session_and_project(
    operator, admin_user, django_capture_on_commit_callbacks
):
    project = project_default()
    project_grant_set(
        project_id=project.pk,
        actor=Actor.for_user(admin_user),
        grant={"tools": ["calculate", "echo", "send_email"]},
    )
    actor = Actor.for_user(operator, via_api=True)
    session = session_create(
        actor=actor, project=project, external_id="s-1", grant={"tools": ["calculate", "echo"]}
    )
    capture = django_capture_on_commit_callbacks
    with capture(execute=True):
        run = run_create(
            actor=actor,
            agent="client",
            goal="three grants",
            session=session,
            token_grant={"tools": ["calculate", "send_email"], "constraints": {}},
        )
    outcomes = {}
    for tool, args in (
        ("calculate", {"expression": "1"}),
        ("echo", {"value": 1}),
        ("send_email", _email()),
    ):
        with capture(execute=True):
            step = step_append(actor=actor, run_id=run.pk, tool=tool, args=args)
        step.refresh_from_db()
        outcomes[tool] = (step.status, (step.error or {}).get("grant"))
    # Only calculate is in all three; echo is not the token's, send_email not the session's.
    assert outcomes == {
        "calculate": ("succeeded", None),
        "echo": ("refused", "token"),
        "send_email": ("refused", "session"),
    }


@pytest.mark.parametrize(
    "grant",
    [
        ["calculate"],
        {"tools": "calculate"},
        {"tools": ["calculate"], "other": 1},
        {"tools": [""]},
        {"tools": ["calculate"], "constraints": {"calculate": "__import__('os')"}},
        {"tools": ["calculate"], "constraints": {"calculate": 5}},
        {"tools": ["calculate"], "constraints": []},
        {"tools": ["calculate"], "constraints": None},
    ],
)
def test_a_malformed_grant_is_refused_and_nothing_is_created(operator, grant):
    with assert_unchanged(), pytest.raises(InvalidInput) as refused:
        run_create(actor=Actor.for_user(operator), agent="plan", goal="g", steps=[], grant=grant)
    assert refused.value.field == "grant"


def recorded_call(call_id: str, tool: str, arguments: str, answer: str) -> list[dict[str, Any]]:
    """An assistant message calling ``tool`` with ``arguments`` (JSON text) and the tool's
    recorded ``answer``, as OpenAI chat messages."""
    call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": answer},
    ]


TRANSCRIPT = [
    {"role": "user", "content": "what is 2+2, then pay it"},
    *recorded_call("c1", "calculate", '{"expression": "2+2"}', "4.0"),
    *recorded_call("c2", "transfer_money", '{"amount": 900}', "done"),
]


def test_a_transcript_run_fails_on_a_recorded_call_outside_its_grant(
    operator, django_capture_on_commit_callbacks
):
    before = snapshot()
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="transcript",
            goal="replay",
            transcript=TRANSCRIPT,
            grant={"tools": ["calculate"]},
        )
    run.refresh_from_db()
    steps = list(run.steps.order_by("index"))
    assert [(s.tool, s.status) for s in steps] == [
        ("calculate", "succeeded"),
        ("transfer_money", "refused"),
    ]
    assert (run.status, run.error["type"]) == (RunStatus.FAILED, "not_granted")
    # The refused step never ran: no attempt, no ledger row, no result replayed.
    assert steps[1].attempts == 0
    assert steps[1].result is None
    added = new_rows(before, snapshot())
    assert [row["step_id"] for row in added["ToolCall"]] == [steps[0].pk]
    assert [row["step_id"] for row in added["StepAttempt"]] == [steps[0].pk]
    assert not ApprovalRequest.objects.exists()


def test_a_refused_step_records_the_policy_version_it_was_decided_under(
    operator, admin_user, django_capture_on_commit_callbacks
):
    project = project_default()
    admin = Actor.for_user(admin_user)
    project_grant_set(project_id=project.pk, actor=admin, grant={"tools": ["calculate"]})
    project_grant_set(project_id=project.pk, actor=admin, grant={"tools": ["echo"]})
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="echo",
            steps=[
                {"tool": "echo", "args": {"value": 1}},
                {"tool": "calculate", "args": {"expression": "1"}},
            ],
        )
    steps = list(Step.objects.filter(run=run).order_by("index"))
    project.refresh_from_db()
    assert project.policy_version == 2
    assert [s.policy_version for s in steps] == [2, 2]
    assert [s.status for s in steps] == ["succeeded", "refused"]
    assert steps[1].error["grant"] == "project"
    assert AuditEvent.objects.filter(verb="policy.grant_changed").count() == 2


def test_the_refusal_is_on_the_runs_timeline(operator, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="mail",
            steps=[send_email_step()],
            grant=CALC_ONLY,
        )
    client = Client()
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Refused (not granted)" in html
    assert "send_email is not among the granted tools" in html


def test_a_reviewer_cannot_edit_a_call_outside_its_runs_grant(
    operator, reviewer, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    grant = {"tools": ["send_email"], "constraints": {"send_email": "len(to) <= 1"}}
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=actor, agent="client", goal="one mail", grant=grant)
    with django_capture_on_commit_callbacks(execute=True):
        step = step_append(actor=actor, run_id=run.pk, tool="send_email", args=_email())
    approval = ApprovalRequest.objects.get(step=step)
    wider = {**_email(), "to": ["a@example.com", "b@example.com"]}
    with assert_unchanged(), pytest.raises(InvalidInput) as refused:
        approval_decide(
            approval_id=approval.pk,
            actor=Actor.for_user(reviewer),
            decision="approve",
            args=wider,
        )
    assert "len(to) <= 1" in refused.value.message
    assert mail.outbox == []
