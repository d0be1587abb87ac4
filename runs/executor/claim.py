"""Claiming a queued step: queued → running under a lease, its attempt row, its ledger row;
and the heartbeat that extends the lease while the tool runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from agentops import rows
from agentops.actors import Actor
from agentops.clock import DatabaseNow, DatabaseTime
from audit.services import audited_atomic
from runs.executor.ledger import ledger_open
from runs.models import Run, Step, StepAttempt
from runs.statuses import AttemptStatus, RunStatus, StepStatus
from runs.transitions import lock_run_of_step, lock_step, record_transition, save_step


@dataclass
class Ahead:
    """What the transaction that claimed a step left as it committed, for the transaction
    that records the step's outcome (``runs.executor.record``), which then checks it instead
    of reading it: the run (``version`` as committed); the run's open steps after the claimed
    one, in order, as they were when read (``steps``: the first is the next to claim), and
    whether they were all of them (``complete``); the run's audit chain head (events, last
    event id, last hash) and event ids reserved for that chain, in order."""

    run: Run
    steps: list[Step]
    complete: bool
    head: tuple[int, int, str]
    ids: list[int]


@dataclass
class Claim:
    """A claimed step and how to get its outcome (``runs.executor.ledger``: ``CALL``,
    ``REPLAY``, ``LEDGER`` with the ``ledger_result``, or ``UNKNOWN``); ``ahead``, when the
    claiming transaction left what recording the outcome needs (``Ahead``)."""

    step: Step
    plan: str
    ledger_result: Any = None
    ahead: Ahead | None = None


def claim_locked(
    run: Run, step: Step, actor: Actor, *, status_was: str = StepStatus.QUEUED
) -> Claim:
    """Claim a queued step of a running run for ``actor`` (both locked by the caller):
    queued → running under a lease, its attempt row, its ledger row opened. ``status_was``
    is the status of the step's row (pending when it was queued in this transaction)."""
    now = timezone.now()
    # Lease: the step's timeout plus a margin for recording the outcome; a heartbeat extends
    # it. Past it, the sweeper takes the worker for dead. From the database's clock, which the
    # sweeper compares it with, whatever this host's clock says (an SQL expression in the
    # claim's UPDATE: no round trip more).
    lease = DatabaseTime(step.timeout_seconds + settings.AGENTOPS_LEASE_MARGIN_SECONDS)
    step.claim(owner=actor.id, lease_expires_at=lease, now=now)
    save_step(step, status_was=status_was)
    rows.insert(
        [
            StepAttempt(
                step_id=step.pk,
                number=step.attempts,
                status=AttemptStatus.RUNNING,
                worker=actor.id,
                started_at=now,
            )
        ],
        returning=False,
    )
    plan, ledger_result = ledger_open(run, step, now)
    record_transition(actor, step, StepStatus.QUEUED, attempt=step.attempts)
    return Claim(step, plan, ledger_result)


def claim_step(step_id: int, actor: Actor) -> Claim | None:
    """Claim the queued step ``step_id`` in its own transaction; None when it is not queued
    or its run is not running (a duplicate or late wake-up: nothing to do)."""
    with audited_atomic():
        run = lock_run_of_step(step_id)
        if run is None:
            return None
        step = lock_step(step_id)
        if step.status != StepStatus.QUEUED or run.status != RunStatus.RUNNING:
            return None
        return claim_locked(run, step, actor)


def step_heartbeat(*, step_id: int, owner: str, extend_seconds: int) -> bool:
    """Extend the lease of a running step held by ``owner`` to now + ``extend_seconds``
    (seconds), now by the database's clock (``agentops.clock``).

    Returns False when the lease is no longer ``owner``'s (the step was cancelled or recovered):
    the tool should stop. One conditional UPDATE, no lock held.
    """
    lease = DatabaseNow() + timedelta(seconds=extend_seconds)
    updated = Step.objects.filter(pk=step_id, status=StepStatus.RUNNING, lease_owner=owner).update(
        lease_expires_at=lease
    )
    return updated == 1
