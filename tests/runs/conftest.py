"""Fixtures shared by the tests of runs."""

from __future__ import annotations

import pytest

from runs.models import Run
from testsupport.factories import make_run


@pytest.fixture
def client_run(operator, django_capture_on_commit_callbacks) -> Run:
    """A client run requested by ``operator`` through the API, started (on-commit work run)."""
    return make_run(
        operator,
        agent="client",
        goal="client run",
        capture=django_capture_on_commit_callbacks,
        via_api=True,
    )
