"""Data for page tests: runs built through the services (Celery eager, on-commit executed)."""

from __future__ import annotations

from typing import Any

import pytest

from testsupport.factories import plan_run

SEND_EMAIL = {
    "tool": "send_email",
    "args": {"to": ["ops@example.com"], "subject": "weekly report", "body": "all good"},
    "rationale": "the user asked for the weekly report by mail",
}
CALCULATE = {"tool": "calculate", "args": {"expression": "6*7"}, "rationale": "need the total"}


@pytest.fixture
def make_run(operator, django_capture_on_commit_callbacks):
    """Create a plan run as the operator and let it advance as far as it can."""

    def make(steps: list[dict[str, Any]], goal: str = "send the weekly report") -> Any:
        return plan_run(operator, steps, capture=django_capture_on_commit_callbacks, goal=goal)

    return make


@pytest.fixture
def awaiting_run(make_run):
    """A run whose first step succeeded and whose second (send_email) awaits approval."""
    return make_run([CALCULATE, SEND_EMAIL])
