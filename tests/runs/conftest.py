"""Fixtures shared by the tests of runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runs.models import Run
from testsupport.database import scratch_database
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


@pytest.fixture
def empty_database(transactional_db: None) -> Iterator[str]:
    """Django's default connection on an empty database of the test's own for the test, dropped
    after it (``testsupport.database.scratch_database``; yields its name): a test takes it
    through the migration history (``testsupport.migration_history``) while the test database
    the other tests share stays at the newest schema."""
    with scratch_database() as name:
        yield name
