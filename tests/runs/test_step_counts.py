"""``runs.selectors.step_counts``: each run's steps in all, succeeded and answered with a tool
error, as the runs list shows them."""

from __future__ import annotations

import uuid

import pytest

from runs.models import StepStatus
from runs.selectors import step_counts
from testsupport.factories import run_row

pytestmark = pytest.mark.django_db


OK = {"status": StepStatus.SUCCEEDED}
ERROR = {"status": StepStatus.SUCCEEDED, "tool_error": True}


def test_counts_all_succeeded_and_tool_errors_per_run() -> None:
    others = [
        {"status": status} for status in (StepStatus.FAILED, StepStatus.PENDING, StepStatus.RUNNING)
    ]
    mixed = run_row(steps=[OK, OK, ERROR, *others])
    errors_only = run_row(steps=[ERROR, ERROR])
    empty = run_row()
    other = run_row(steps=[OK])
    missing = uuid.uuid4()
    counts = step_counts(run_ids=[mixed.pk, errors_only.pk, empty.pk, missing])
    assert counts == {mixed.pk: (6, 2, 1), errors_only.pk: (2, 0, 2)}
    assert step_counts(run_ids=[other.pk]) == {other.pk: (1, 1, 0)}
    assert step_counts(run_ids=[]) == {}
