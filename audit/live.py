"""Publishing committed audit events to live (WebSocket) clients through the channel layer.

Groups: ``runs`` (every run's events), ``run.<uuid>`` (one run's) and ``approvals`` (events whose
verb starts with ``approval.``). The message is ``{"type": "audit.event", "event": {...}}`` with
the same JSON as ``GET /api/v1/runs/{id}/events/``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

if TYPE_CHECKING:
    from audit.models import AuditEvent

logger = logging.getLogger(__name__)

RUNS_GROUP = "runs"
APPROVALS_GROUP = "approvals"


def run_group(run_id: object) -> str:
    """The channel-layer group of one run's events."""
    return f"run.{run_id}"


def groups_for(event: AuditEvent) -> list[str]:
    """Every group that should receive ``event``."""
    groups = []
    if event.run_id:
        groups += [RUNS_GROUP, run_group(event.run_id)]
    if event.verb.startswith("approval."):
        groups.append(APPROVALS_GROUP)
    return groups


def _send(message: dict[str, Any], groups: list[str]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for group in groups:
        try:
            async_to_sync(layer.group_send)(group, message)
        except Exception:
            # The database already holds the event; a client that missed it replays it on
            # reconnect, so a broken channel layer must not fail the change itself.
            logger.exception("could not publish audit event to %s", group)


def publish_on_commit(event: AuditEvent) -> None:
    """Send ``event`` to its groups once the surrounding transaction commits (never before)."""
    from audit.serializers import AuditEventSerializer

    groups = groups_for(event)
    if not groups:
        return

    def send() -> None:
        _send({"type": "audit.event", "event": AuditEventSerializer(event).data}, groups)

    transaction.on_commit(send)
