"""Compensating a run (a saga): its compensable steps undone last first, through the usual
gates, ledger and idempotency keys, ending ``compensated`` or ``compensation_failed``."""

from __future__ import annotations

import pytest
from django_fsm import TransitionNotAllowed

from agentops.actors import Actor
from agentops.errors import Conflict
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from audit.models import AuditEvent
from runs.control.compensation import run_compensate
from runs.control.create import run_create
from runs.control.lifecycle import run_cancel, run_resume
from runs.models import Run, RunStatus, Step, StepStatus, ToolCall
from runs.tools import Compensation, CompensationError, compensation_args
from tests.tools import EFFECTS
from testsupport.factories import make_run, plan_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

CRASH = {"tool": "test_crash", "args": {}}


def reserve(seat: str) -> dict[str, object]:
    return {"tool": "test_reserve", "args": {"seat": seat}}


def steps_of(run: Run) -> list[tuple[int, str, str, int | None]]:
    """(index, tool, status, index of the step it undoes) of each step, in order."""
    return [
        (step.index, step.tool, step.status, step.compensates.index if step.compensates else None)
        for step in run.steps.select_related("compensates").order_by("index")
    ]


def effects_of(run: Run, tool: str) -> list[dict[str, object]]:
    """The arguments of each effect of ``tool`` under the idempotency keys of ``run``."""
    keys = set(run.steps.values_list("idempotency_key", flat=True))
    return [args for key in sorted(keys) for name, args in EFFECTS.get(key, []) if name == tool]


def decide(run: Run, reviewer, capture, decision: str) -> Run:
    """``decision`` (approve, reject) on the run's pending approval request, by ``reviewer``;
    returns the run read back."""
    approval = ApprovalRequest.objects.get(step__run=run, status="pending")
    with capture(execute=True):
        approval_decide(
            approval_id=approval.pk,
            actor=Actor.for_user(reviewer),
            decision=decision,
            comment="no" if decision == "reject" else "",
        )
    return Run.objects.get(pk=run.pk)


def charged_then_compensating(user, capture, amount: int) -> Run:
    """A plan run that charged ``amount``, failed, and is compensating: its refund waits for
    a reviewer."""
    run = plan_run(
        user, [{"tool": "test_charge", "args": {"amount": amount}}, CRASH], capture=capture
    )
    run = compensate(run, user, capture)
    assert run.status_info.value == "awaiting_approval"
    return run


def compensate(run: Run, user, capture) -> Run:
    with capture(execute=True):
        run_compensate(run_id=run.pk, actor=Actor.for_user(user))
    return Run.objects.get(pk=run.pk)


def test_a_failed_run_is_compensated_last_first(operator, django_capture_on_commit_callbacks):
    run = plan_run(
        operator,
        [reserve("1A"), reserve("1B"), {"tool": "echo", "args": {"value": 1}}, CRASH],
        capture=django_capture_on_commit_callbacks,
    )
    assert run.status == RunStatus.FAILED

    run = compensate(run, operator, django_capture_on_commit_callbacks)

    assert (run.status, run.compensating) == (RunStatus.COMPENSATED, True)
    assert run.error["type"] == "ValueError"  # why it stopped is kept
    assert steps_of(run)[4:] == [
        (4, "test_release", StepStatus.SUCCEEDED, 1),
        (5, "test_release", StepStatus.SUCCEEDED, 0),
    ]
    undo = run.steps.filter(index__gte=4).order_by("index")
    assert [step.args for step in undo] == [{"reservation_id": "R-1B"}, {"reservation_id": "R-1A"}]
    for step in run.steps.filter(index__gte=4):
        assert ToolCall.objects.get(idempotency_key=step.idempotency_key).status == "succeeded"
        assert len(EFFECTS[step.idempotency_key]) == 1
    verbs = list(AuditEvent.objects.filter(run_id=run.pk).values_list("verb", flat=True))
    assert verbs[-1] == "run.compensated"
    started = AuditEvent.objects.filter(run_id=run.pk, object_type="run", from_state="failed")
    assert started.get().payload == {"undoes": [1, 0]}


def test_compensating_twice_acts_once(operator, django_capture_on_commit_callbacks):
    run = plan_run(operator, [reserve("2A"), CRASH], capture=django_capture_on_commit_callbacks)
    run = compensate(run, operator, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.COMPENSATED
    with assert_unchanged(live_streams=False), pytest.raises(Conflict, match="compensated"):
        compensate(run, operator, django_capture_on_commit_callbacks)
    assert effects_of(run, "test_release") == [{"reservation_id": "R-2A"}]
    assert run.steps.count() == 3


def test_a_cancelled_run_can_be_compensated(operator, django_capture_on_commit_callbacks):
    run = plan_run(
        operator,
        [
            reserve("3A"),
            {"tool": "send_email", "args": {"to": ["a@example.com"], "subject": "s", "body": "b"}},
        ],
        capture=django_capture_on_commit_callbacks,
    )
    run_cancel(run_id=run.pk, actor=Actor.for_user(operator))
    run = compensate(run, operator, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.COMPENSATED
    assert steps_of(run)[2:] == [(2, "test_release", StepStatus.SUCCEEDED, 0)]


def test_a_run_with_nothing_to_undo_is_refused_and_unchanged(
    operator, django_capture_on_commit_callbacks
):
    run = plan_run(
        operator,
        [{"tool": "echo", "args": {"value": 1}}, CRASH],
        capture=django_capture_on_commit_callbacks,
    )
    with (
        assert_unchanged(live_streams=False),
        pytest.raises(Conflict, match="nothing to compensate"),
    ):
        compensate(run, operator, django_capture_on_commit_callbacks)
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_a_running_or_succeeded_run_is_not_compensated(
    operator, django_capture_on_commit_callbacks
):
    run = plan_run(operator, [reserve("4A")], capture=django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    with (
        assert_unchanged(live_streams=False),
        pytest.raises(Conflict, match="this run is succeeded"),
    ):
        compensate(run, operator, django_capture_on_commit_callbacks)


def test_a_failing_compensation_ends_compensation_failed_with_what_is_left_undone(
    operator, django_capture_on_commit_callbacks
):
    run = plan_run(
        operator,
        [reserve("5A"), {"tool": "test_hold", "args": {}}, CRASH],
        capture=django_capture_on_commit_callbacks,
    )
    run = compensate(run, operator, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.COMPENSATION_FAILED
    assert steps_of(run)[3:] == [
        (3, "test_crash", StepStatus.FAILED, 1),
        (4, "test_release", StepStatus.SKIPPED, 0),
    ]
    assert run.error["type"] == "compensation_failed"
    assert run.error["cause"] == "ValueError"
    assert run.error["left_undone"] == [
        {"step": 1, "tool": "test_hold", "compensation": 3},
        {"step": 0, "tool": "test_reserve", "compensation": 4},
    ]
    assert effects_of(run, "test_release") == []
    # It is over: neither resumed nor compensated again.
    with pytest.raises(TransitionNotAllowed):
        run_resume(run_id=run.pk, actor=Actor.for_user(operator))
    with pytest.raises(Conflict):
        compensate(run, operator, django_capture_on_commit_callbacks)


def test_a_compensation_waits_for_its_approval_then_runs(
    operator, reviewer, django_capture_on_commit_callbacks
):
    run = charged_then_compensating(operator, django_capture_on_commit_callbacks, 40)
    assert effects_of(run, "test_refund") == []
    run = decide(run, reviewer, django_capture_on_commit_callbacks, "approve")
    assert run.status == RunStatus.COMPENSATED
    assert effects_of(run, "test_refund") == [{"amount": 40}]


def test_a_rejected_compensation_ends_compensation_failed(
    operator, reviewer, django_capture_on_commit_callbacks
):
    run = charged_then_compensating(operator, django_capture_on_commit_callbacks, 41)
    run = decide(run, reviewer, django_capture_on_commit_callbacks, "reject")
    assert run.status == RunStatus.COMPENSATION_FAILED
    assert run.error["cause"] == "rejected"
    assert run.error["left_undone"] == [{"step": 0, "tool": "test_charge", "compensation": 2}]
    assert effects_of(run, "test_refund") == []


def test_a_client_run_whose_compensation_is_rejected_does_not_go_on(
    operator, reviewer, django_capture_on_commit_callbacks
):
    # A client agent replans after a refusal; a refused compensation is not its to replan.
    with django_capture_on_commit_callbacks(execute=True):
        run = make_run(
            operator, agent="client", steps=[{"tool": "test_charge", "args": {"amount": 42}}, CRASH]
        )
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.FAILED
    run = compensate(run, operator, django_capture_on_commit_callbacks)
    run = decide(run, reviewer, django_capture_on_commit_callbacks, "reject")
    assert run.status == RunStatus.COMPENSATION_FAILED


def test_cancelling_a_compensating_run_ends_compensation_failed(
    operator, django_capture_on_commit_callbacks
):
    run = charged_then_compensating(operator, django_capture_on_commit_callbacks, 43)
    run_cancel(run_id=run.pk, actor=Actor.for_user(operator), reason="stop")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.COMPENSATION_FAILED
    assert (run.error["cause"], run.error["left_undone"]) == (
        "cancelled",
        [{"step": 0, "tool": "test_charge", "compensation": 2}],
    )
    assert Step.objects.get(run=run, index=2).status == StepStatus.CANCELLED


def compensating_on_failure(user, capture, *steps: dict[str, object]) -> Run:
    """A plan run of ``steps`` created with ``on_failure`` = compensate, run as far as it
    goes; read back."""
    with capture(execute=True):
        run = run_create(
            actor=Actor.for_user(user),
            agent="plan",
            goal="auto",
            steps=list(steps),
            on_failure="compensate",
        )
    return Run.objects.get(pk=run.pk)


def test_a_run_whose_policy_says_so_is_compensated_when_it_fails(
    operator, django_capture_on_commit_callbacks
):
    run = compensating_on_failure(
        operator, django_capture_on_commit_callbacks, reserve("6A"), CRASH
    )
    assert run.status == RunStatus.COMPENSATED
    assert effects_of(run, "test_release") == [{"reservation_id": "R-6A"}]
    assert AuditEvent.objects.filter(run_id=run.pk, verb="run.failed").exists()


def test_a_run_whose_policy_compensates_but_has_nothing_to_undo_stays_failed(
    operator, django_capture_on_commit_callbacks
):
    run = compensating_on_failure(operator, django_capture_on_commit_callbacks, CRASH)
    assert run.status == RunStatus.FAILED
    refused = AuditEvent.objects.get(run_id=run.pk, verb="run.compensation_refused")
    assert "nothing to compensate" in refused.payload["reason"]


def test_compensation_arguments_come_from_the_call_and_its_result():
    compensation = Compensation(
        "undo",
        {"id": "result.reservation_id", "user": "args.user.id", "key": "call.idempotency_key"},
    )
    built = compensation_args(
        compensation,
        args={"user": {"id": "u1"}},
        result='{"reservation_id": "HATHAT"}',
        call={"idempotency_key": "k", "tool": "book", "index": 0},
    )
    assert built == {"id": "HATHAT", "user": "u1", "key": "k"}
    with pytest.raises(CompensationError, match="no 'reservation_id'"):
        compensation_args(compensation, args={"user": {"id": "u1"}}, result="{}", call={})
    with pytest.raises(CompensationError, match="is text"):
        compensation_args(compensation, args={}, result="Error: no", call={})
    with pytest.raises(ValueError, match="bad path"):
        Compensation("undo", {"id": "state.x"})
