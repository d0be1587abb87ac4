"""Claiming a queued step: queued → running under a lease, its attempt row, its ledger row
(``runs.executor.record`` extends the lease while the tool runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from agentops.actors import Actor
from agentops.clock import DatabaseTime
from audit.services import audited_atomic
from runs.executor.ledger import ledger_open
from runs.models import Run, Step, StepAttempt
from runs.statuses import AttemptStatus, StepStatus
from runs.store.locks import lock_step_of_running_run
from runs.store.step import Ahead
from runs.store.writes import insert_new
from runs.transitions import save_step, transition


@dataclass
class Claim:
    """A claimed step and how to get its outcome (``runs.executor.ledger``: ``CALL``,
    ``REPLAY``, ``LEDGER`` with the ``ledger_result``, or ``UNKNOWN``); ``ahead``, when the
    claiming transaction left what recording the outcome needs (``Ahead``)."""

    step: Step
    plan: str
    ledger_result: Any = None
    ahead: Ahead | None = None


def claim_locked(run: Run, step: Step, actor: Actor, *, status_was: str = "") -> Claim:
    """Claim a queued step of a running run for ``actor`` (both locked by the caller):
    queued → running under a lease, its attempt row, its ledger row opened. ``status_was``
    is the status of the step's row when not queued (pending when it was queued in this
    transaction)."""
    now = timezone.now()
    # Lease: the step's timeout plus a margin for recording the outcome; a heartbeat extends
    # it. Past it, the sweeper takes the worker for dead. From the database's clock, which the
    # sweeper compares it with, whatever this host's clock says (an SQL expression in the
    # claim's UPDATE: no round trip more).
    lease = DatabaseTime(step.timeout_seconds + settings.AGENTOPS_LEASE_MARGIN_SECONDS)
    transition(
        step,
        "claim",
        actor=actor,
        save=False,
        owner=actor.id,
        lease_expires_at=lease,
        now=now,
        payload={"attempt": step.attempts + 1},  # the attempt the claim counts
    )
    save_step(step, status_was=status_was or StepStatus.QUEUED)
    insert_new(
        [
            StepAttempt(
                step_id=step.pk,
                number=step.attempts,
                status=AttemptStatus.RUNNING,
                worker=actor.id,
                started_at=now,
            )
        ]
    )
    plan, ledger_result = ledger_open(run, step, now)
    return Claim(step, plan, ledger_result)


def claim_step(step_id: int, actor: Actor) -> Claim | None:
    """Claim the queued step ``step_id`` in its own transaction; None when it is not queued
    or its run is not running (a duplicate or late wake-up: nothing to do)."""
    with audited_atomic():
        locked = lock_step_of_running_run(step_id, StepStatus.QUEUED)
        return None if locked is None else claim_locked(*locked, actor)
