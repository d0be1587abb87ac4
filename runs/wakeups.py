"""Wake-ups: the messages that tell the workers a step or run has work, sent after commit.

The broker only carries wake-ups (ids); the database decides what runs, so a lost or repeated
wake-up is harmless: one that cannot be sent after its transaction committed (the broker down
for a moment) is logged, not raised, so the committed change is not answered as an error, and
the sweeper (``runs.recovery.sweep``) sends it again later. The services here never import the
Celery tasks that receive them (an edge): ``RunsConfig.ready`` installs the sender
(``runs.tasks.CeleryWakeups``) at start-up.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction


class Wakeups(Protocol):
    """What sends wake-ups to the workers; each call sends one message, now."""

    def execute_step(self, step_id: int) -> None:
        """Claim and execute the queued step ``step_id``."""

    def advance_run(self, run_id: uuid.UUID) -> None:
        """Start or move on the run ``run_id``."""

    def retry_step(self, step_id: int, delay: float) -> None:
        """Queue the step ``step_id``, waiting to retry, after ``delay`` seconds."""

    def compact_run(self, run_id: uuid.UUID) -> None:
        """Compact the run ``run_id``'s context if it is still past the token threshold."""

    def compact_session(self, session_id: uuid.UUID) -> None:
        """Compact the session ``session_id``'s context if it is still past the threshold."""


_installed: list[Wakeups] = []


def install(sender: Wakeups) -> None:
    """Make ``sender`` the one that sends wake-ups (called once, at start-up)."""
    _installed[:] = [sender]


def _sender() -> Wakeups:
    if not _installed:
        raise ImproperlyConfigured("no wake-up sender installed: is the runs app loaded?")
    return _installed[0]


def execute_step_on_commit(step_id: int) -> None:
    """Send ``execute_step(step_id)`` to the workers once the transaction commits."""
    transaction.on_commit(lambda: _sender().execute_step(step_id), robust=True)


def advance_run_on_commit(run_id: uuid.UUID) -> None:
    """Send ``advance_run(run_id)`` to the workers once the transaction commits."""
    transaction.on_commit(lambda: _sender().advance_run(run_id), robust=True)


def retry_step_on_commit(step_id: int, delay: float) -> None:
    """Send ``retry_step(step_id)``, due in ``delay`` seconds, once the transaction commits."""
    transaction.on_commit(lambda: _sender().retry_step(step_id, delay), robust=True)


def compact_run_on_commit(run_id: uuid.UUID) -> None:
    """Send ``compact_run(run_id)`` to the workers once the transaction commits."""
    transaction.on_commit(lambda: _sender().compact_run(run_id), robust=True)


def compact_session_on_commit(session_id: uuid.UUID) -> None:
    """Send ``compact_session(session_id)`` to the workers once the transaction commits."""
    transaction.on_commit(lambda: _sender().compact_session(session_id), robust=True)
