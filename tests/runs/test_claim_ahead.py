"""Recording an outcome checks what the claim's transaction left instead of reading it again
(``runs.executor.record``, ``Ahead``): whatever another transaction changed while the tool ran
(the run, its audit chain, its steps) sends the recording back to reading, and nothing of the
change is lost or overwritten.

The meddling tool runs at step 1, whose outcome is the first one recorded from what a claim
left (step 0 was claimed by the run's start). It makes its change through its own database
connection, as an operator or another process would, while no transaction of the worker is
open.
"""

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from agentops.actors import Actor
from audit.models import AuditEvent, run_chain
from audit.selectors import chain_verify
from audit.services import audit_record, audited_atomic
from runs.control.lifecycle import run_cancel
from runs.executor.entry import run_advance
from runs.models import Run, RunStatus, Step, StepAttempt, StepStatus, ToolCall
from runs.statuses import CallStatus
from runs.store import step as step_store
from runs.tools import ToolContext, register
from runs.transitions import lock_run, save_run
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db(transaction=True)

MEDDLER = Actor.system("meddler")


def _note(run_id: str, at: int) -> None:
    with audited_atomic():
        run = lock_run(run_id)
        audit_record(
            actor=MEDDLER,
            verb="run.noted",
            object_type="run",
            object_id=run_id,
            run_id=run.pk,
            project_id=run.project_id,
        )


def _add_usage(run_id: str, at: int) -> None:
    with audited_atomic():
        run = lock_run(run_id)
        run.usage_tokens += 42
        save_run(run)


def _cancel(run_id: str, at: int) -> None:
    run_cancel(run_id=uuid.UUID(run_id), actor=MEDDLER, reason="meddled")


def _take_over(run_id: str, at: int) -> None:
    # What the sweeper and a second worker leave when this worker's lease has expired: the
    # step running again, its next attempt held by the other worker (the run row untouched).
    Step.objects.filter(run_id=run_id, index=at).update(
        attempts=F("attempts") + 1, lease_owner="other:1"
    )


def _skip_next(run_id: str, at: int) -> None:
    # The step after the running one leaves the open steps, as a status write through
    # ``runs.transitions.save_step`` would (its ``updated_at`` moves with it).
    Step.objects.filter(run_id=run_id, index=at + 1).update(
        status=StepStatus.SKIPPED, updated_at=timezone.now()
    )


CHANGES: dict[str, Callable[[str, int], None]] = {
    "note": _note,
    "usage": _add_usage,
    "cancel": _cancel,
    "take_over": _take_over,
    "skip_next": _skip_next,
}


@register("test_meddle", description="Changes its own run while it runs (tests only).")
def meddle(args: dict[str, Any], ctx: ToolContext) -> str:
    try:
        CHANGES[args["change"]](ctx.run_id, args["at"])
    finally:
        connection.close()  # this tool thread's own connection
    return args["change"]


@pytest.fixture(autouse=True)
def one_worker_runs_the_whole_run(settings: Any) -> None:
    """The worker claims every next step itself, however slow the machine."""
    settings.AGENTOPS_CLAIM_NEXT_SECONDS = 60


def meddled_run(operator: Any, change: str, *, at: int = 1, steps: int = 4) -> Run:
    """A plan run of ``steps`` echo steps but the one at ``at``, which makes ``change``."""
    plan: list[dict[str, Any]] = [{"tool": "echo", "args": {"value": 1}}] * steps
    plan[at] = {"tool": "test_meddle", "args": {"change": change, "at": at}}
    run = make_run(operator, goal="meddled", steps=plan)
    run_advance(run_id=run.pk, actor=Actor.worker(), execute=True)
    return Run.objects.get(pk=run.pk)


def statuses(run: Run) -> list[str]:
    return list(run.steps.order_by("index").values_list("status", flat=True))


# Step 1: the first outcome recorded from what a claim left; step 5: from steps and event ids
# a claim carried on from an earlier read; step 9: after the second read (``_AHEAD_STEPS``).
AT = pytest.mark.parametrize("at", [1, 5, 9])


@AT
def test_an_event_appended_to_the_chain_meanwhile_stays_in_a_valid_chain(operator, at):
    run = meddled_run(operator, "note", at=at, steps=12)
    assert run.status == RunStatus.SUCCEEDED
    assert statuses(run) == [StepStatus.SUCCEEDED] * 12
    verbs = list(
        AuditEvent.objects.filter(chain=run_chain(run.pk))
        .order_by("id")
        .values_list("verb", "object_id")
    )
    noted = verbs.index(("run.noted", str(run.pk)))
    # Between the step starting and succeeding, in id order, which the chain verifies.
    step = str(run.steps.get(index=at).pk)
    assert verbs.index(("step.running", step)) < noted < verbs.index(("step.succeeded", step))
    assert chain_verify(run_chain(run.pk)).ok


def test_a_change_to_the_run_meanwhile_is_kept(operator):
    run = meddled_run(operator, "usage")
    assert run.status == RunStatus.SUCCEEDED
    assert statuses(run) == [StepStatus.SUCCEEDED] * 4
    assert run.usage_tokens == 42
    assert run.state["completed_steps"] == 4
    assert chain_verify(run_chain(run.pk)).ok


def test_a_run_cancelled_meanwhile_runs_no_further_step(operator):
    run = meddled_run(operator, "cancel")
    assert run.status == RunStatus.CANCELLED
    assert statuses(run) == [
        StepStatus.SUCCEEDED,
        StepStatus.CANCELLED,
        StepStatus.CANCELLED,
        StepStatus.CANCELLED,
    ]
    # The call took effect: its ledger row says so, though its step no longer moves the run.
    meddling = run.steps.get(index=1)
    assert ToolCall.objects.get(idempotency_key=meddling.idempotency_key).status == (
        CallStatus.SUCCEEDED
    )
    assert not ToolCall.objects.filter(step__run=run, step__index__gt=1).exists()
    assert chain_verify(run_chain(run.pk)).ok


@AT
def test_a_step_another_worker_took_over_meanwhile_is_left_to_it(operator, at):
    run = meddled_run(operator, "take_over", at=at, steps=12)
    assert run.status == RunStatus.RUNNING
    assert statuses(run) == (
        [StepStatus.SUCCEEDED] * at + [StepStatus.RUNNING] + [StepStatus.PENDING] * (11 - at)
    )
    taken = run.steps.get(index=at)
    assert (taken.attempts, taken.lease_owner, taken.result) == (2, "other:1", None)
    # This worker's attempt is on record; the other worker's attempt owns the step's outcome.
    assert StepAttempt.objects.get(step=taken, number=1).status == "succeeded"
    assert chain_verify(run_chain(run.pk)).ok


@AT
def test_a_next_step_that_left_the_open_steps_meanwhile_is_passed_over(operator, at):
    run = meddled_run(operator, "skip_next", at=at, steps=12)
    assert run.status == RunStatus.SUCCEEDED
    expected = [StepStatus.SUCCEEDED] * 12
    expected[at + 1] = StepStatus.SKIPPED
    assert statuses(run) == expected
    assert not ToolCall.objects.filter(step__run=run, step__index=at + 1).exists()
    assert chain_verify(run_chain(run.pk)).ok


def test_events_stay_in_id_order_when_a_claim_wrote_more_events_than_it_reserved_ids(
    operator, monkeypatch
):
    """A transaction that writes more events than it reserved ids for gives them ids drawn
    after the ones it reserved for the next transaction: those are then too low for the
    chain, and the next transaction must not use them."""
    monkeypatch.setattr(step_store, "USUAL_EVENTS", 1)
    run = meddled_run(operator, "note", at=1, steps=12)
    assert statuses(run) == [StepStatus.SUCCEEDED] * 12
    # Verified in id order: an event with a lower id than the one it follows breaks the chain.
    assert chain_verify(run_chain(run.pk)).ok
