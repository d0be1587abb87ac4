"""The live stream of the approvals inbox (``/ws/approvals/``): events whose verb starts with
``approval.``. The protocol is described in ``audit.consumers``."""

from __future__ import annotations

from audit.consumers import AuditEventConsumer, Stream
from audit.live import APPROVALS_GROUP


class ApprovalsConsumer(AuditEventConsumer):
    """Approval events (opened, decided, expired, cancelled). Needs
    ``approvals.view_approvalrequest``."""

    permission = "approvals.view_approvalrequest"

    async def get_stream(self) -> Stream | None:
        return Stream(group=APPROVALS_GROUP, verb_prefix="approval.")
