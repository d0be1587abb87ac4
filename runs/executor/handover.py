"""Handing a client step (``Step.executor`` client) to its client: it becomes ``ready``
(``runs.executor.client`` records what the client reports)."""

from __future__ import annotations

from django.utils import timezone

from agentops.actors import Actor
from runs.models import Step
from runs.transitions import transition


def hand_over_locked(step: Step, actor: Actor) -> None:
    """Make a locked client step whose turn came (pending, or waiting at a gate that let it
    through) ``ready`` for its client; the audit event carries its idempotency key."""
    payload = {"idempotency_key": step.idempotency_key}
    transition(step, "hand_over", actor=actor, now=timezone.now(), payload=payload)
