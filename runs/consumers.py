"""Live streams of run events: every run (``/ws/runs/``) and one run (``/ws/runs/<uuid>/``).

The protocol (``?after=``, message shape, close codes) is described in ``audit.consumers``.
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from audit.consumers import AuditEventConsumer, Stream
from audit.live import RUNS_GROUP, run_group
from runs.models import Run


class RunsConsumer(AuditEventConsumer):
    """Every run's events, for the runs list. Needs ``runs.view_run``."""

    permission = "runs.view_run"

    async def get_stream(self) -> Stream | None:
        return Stream(group=RUNS_GROUP)


class RunConsumer(AuditEventConsumer):
    """One run's events, for its timeline. Needs ``runs.view_run``; unknown run: 4404."""

    permission = "runs.view_run"

    async def get_stream(self) -> Stream | None:
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        exists = await database_sync_to_async(Run.objects.filter(pk=run_id).exists)()
        if not exists:
            return None
        return Stream(group=run_group(run_id), run_id=run_id)
