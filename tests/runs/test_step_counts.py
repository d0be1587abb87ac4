"""``runs.selectors.step_counts``: each run's steps in all, succeeded and answered with a tool
error, as the runs list shows them."""

from __future__ import annotations

import uuid

import pytest

from runs.models import Run, Step, StepStatus
from runs.selectors import step_counts

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
