"""Live streams of run events: every run (``/ws/runs/``), one run (``/ws/runs/<uuid>/``) and
one session's own events (``/ws/sessions/<uuid>/``).

The protocol (``?after=``, message shape, close codes) is described in ``audit.consumers``.
"""

from __future__ import annotations

from audit.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, AuditEventConsumer, Stream
from audit.live import run_group, runs_group, session_group
from audit.models import session_chain
from projects.access import Access
from projects.models import Project
from runs.models import AgentSession, Run


class RunsConsumer(AuditEventConsumer):
    """The events of every run of the projects where the user has ``runs.view_run``, for the
    runs list (none of them: 4403)."""

    permission = "runs.view_run"

    def get_stream(self, access: Access) -> Stream | int:
        ids = access.project_ids(self.permission)
        if ids is None:
            ids = list(Project.objects.order_by("pk").values_list("pk", flat=True))
        elif not ids:
            return CLOSE_FORBIDDEN
        return Stream(groups=tuple(runs_group(pid) for pid in ids), project_ids=tuple(ids))


class RunConsumer(AuditEventConsumer):
    """One run's events, for its timeline. Needs ``runs.view_run`` in its project; an unknown
    run or one the user may not see: 4404."""

    permission = "runs.view_run"

    def get_stream(self, access: Access) -> Stream | int:
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        project_id = Run.objects.filter(pk=run_id).values_list("project_id", flat=True).first()
        if project_id is None or not access.can(self.permission, project_id):
            return CLOSE_NOT_FOUND
        return Stream(groups=(run_group(run_id),), project_ids=(project_id,), run_id=run_id)


class SessionConsumer(AuditEventConsumer):
    """One session's own events (its audit chain: items added and removed, compactions,
    state writes, runs added, its runs' messages), for its page. Needs ``runs.view_run`` in
    its project; an unknown session or one the user may not see: 4404."""

    permission = "runs.view_run"

    def get_stream(self, access: Access) -> Stream | int:
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        project_id = (
            AgentSession.objects.filter(pk=session_id).values_list("project_id", flat=True).first()
        )
        if project_id is None or not access.can(self.permission, project_id):
            return CLOSE_NOT_FOUND
        return Stream(
            groups=(session_group(session_id),),
            project_ids=(project_id,),
            chain=session_chain(session_id),
        )
