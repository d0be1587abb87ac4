"""Retention of the gateway's rows: an MCP session goes with its run (``runs.retention``
calls this app's ``McpSessionRows``, registered at start-up)."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from gateway.models import McpSession
from runs.models import Run


class McpSessionRows:
    """Deletes the MCP sessions of runs that retention deletes
    (``runs.retention.DependentRows``); a session holds nothing open of its own (an open call
    is an open step, which retention already waits for)."""

    def exclude_open(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """``runs`` as they are."""
        return runs

    def delete_for_steps(self, step_ids: list[int]) -> None:
        """Nothing of the gateway hangs off a step."""

    def delete_for_runs(self, run_ids: list[uuid.UUID]) -> None:
        """Delete the MCP sessions of the runs ``run_ids``."""
        McpSession.objects.filter(run_id__in=run_ids).delete()
