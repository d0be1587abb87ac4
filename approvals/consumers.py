"""The live stream of the approvals inbox (``/ws/approvals/``): events whose verb starts with
``approval.``. The protocol is described in ``audit.consumers``."""

from __future__ import annotations

from audit.consumers import CLOSE_FORBIDDEN, AuditEventConsumer, Stream
from audit.live import approvals_group
from projects.access import Access
from projects.models import Project


class ApprovalsConsumer(AuditEventConsumer):
    """Approval events (opened, decided, expired, cancelled) of the projects where the user
    has ``approvals.view_approvalrequest`` (none of them: 4403)."""

    permission = "approvals.view_approvalrequest"

    def get_stream(self, access: Access) -> Stream | int:
        ids = access.project_ids(self.permission)
        if ids is None:
            ids = list(Project.objects.order_by("pk").values_list("pk", flat=True))
        elif not ids:
            return CLOSE_FORBIDDEN
        return Stream(
            groups=tuple(approvals_group(pid) for pid in ids),
            project_ids=tuple(ids),
            verb_prefix="approval.",
        )
