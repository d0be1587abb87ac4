"""``runs.selectors.step_counts`` (each run's steps in all, succeeded and answered with a tool
error, as the runs list shows them) and ``checkpoint_states`` (the run page's states)."""

from __future__ import annotations

import uuid

import pytest

from runs.models import Checkpoint, Run, Step, StepStatus
from runs.selectors import checkpoint_states, step_counts

pytestmark = pytest.mark.django_db


def _run(*steps: tuple[str, bool]) -> Run:
    run = Run.objects.create(goal="g", agent="plan")
    for index, (status, tool_error) in enumerate(steps):
        Step.objects.create(
            run=run,
            index=index,
            tool="echo",
            args={},
            idempotency_key=f"{run.pk}:{index}",
            status=status,
            tool_error=tool_error,
        )
    return run


def test_counts_all_succeeded_and_tool_errors_per_run() -> None:
    mixed = _run(
        (StepStatus.SUCCEEDED, False),
        (StepStatus.SUCCEEDED, False),
        (StepStatus.SUCCEEDED, True),
        (StepStatus.FAILED, False),
        (StepStatus.PENDING, False),
        (StepStatus.RUNNING, False),
    )
    errors_only = _run((StepStatus.SUCCEEDED, True), (StepStatus.SUCCEEDED, True))
    empty = _run()
    other = _run((StepStatus.SUCCEEDED, False))
    missing = uuid.uuid4()
    counts = step_counts(run_ids=[mixed.pk, errors_only.pk, empty.pk, missing])
    assert counts == {mixed.pk: (6, 2, 1), errors_only.pk: (2, 0, 2)}
    assert step_counts(run_ids=[other.pk]) == {other.pk: (1, 1, 0)}
    assert step_counts(run_ids=[]) == {}


def test_checkpoint_states_are_each_steps_state_as_written() -> None:
    run = _run(
        (StepStatus.SUCCEEDED, False), (StepStatus.SUCCEEDED, False), (StepStatus.PENDING, False)
    )
    first, second, _ = run.steps.order_by("index")
    written = {
        first.pk: {"customer": {"id": 7, "tags": ["a", "b"]}, "total": 412.5, "ok": True},
        second.pk: {"big": 123456789012345678901234567890, "none": None, "text": "é\u2028"},
    }
    for index, (step_id, state) in enumerate(written.items()):
        Checkpoint.objects.create(run=run, step_id=step_id, index=index, state=state)
    _run((StepStatus.SUCCEEDED, False))
    states = checkpoint_states(run_id=run.pk)
    assert states == written
    assert type(states[second.pk]["big"]) is int
    assert checkpoint_states(run_id=uuid.uuid4()) == {}
