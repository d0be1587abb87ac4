"""MCP sessions whose client went away without ending them do not leave runs running: after
``AGENTOPS_MCP_SESSION_IDLE_SECONDS`` a run with nothing open is completed, one with a call
still open is cancelled (no client would take its answer), and a recent session is left alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.actors import Actor
from gateway import calls
from gateway.services import upstream_register
from gateway.tasks import end_idle_sessions
from projects.services import project_default
from runs.models import Run

pytestmark = pytest.mark.django_db

READ = {"name": "lookup", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
WRITE = {"name": "transfer", "inputSchema": {"type": "object"}, "annotations": {}}


def _session(operator, session_id: str, spec: dict, *, finish: bool) -> Run:
    upstream = upstream_register(name="bank", command="true")
    actor = Actor.for_user(operator, via_api=True)
    run_id = calls.session_run(
        upstream=upstream,
        session_id=session_id,
        actor=actor,
        project_id=project_default().pk,
        client_info=None,
    )
    step = calls.call_step(run_id=run_id, actor=actor, tool=spec["name"], args={}, spec=spec)
    if finish:
        calls.step_outcome(actor=actor, step=step, report={"result": {"content": []}})
    return Run.objects.get(pk=run_id)


def test_idle_sessions_are_ended_and_recent_ones_kept(
    operator, settings, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_MCP_SESSION_IDLE_SECONDS = 600
    with django_capture_on_commit_callbacks(execute=True):
        finished = _session(operator, "s-finished", READ, finish=True)
        waiting = _session(operator, "s-waiting", WRITE, finish=False)
        recent = _session(operator, "s-recent", READ, finish=True)
    assert waiting.status_info.value == "awaiting_approval"
    long_ago = timezone.now() - timedelta(seconds=601)
    Run.objects.filter(pk__in=[finished.pk, waiting.pk]).update(updated_at=long_ago)
    with django_capture_on_commit_callbacks(execute=True):
        assert end_idle_sessions() == {"completed": 1, "cancelled": 1}
    statuses = dict(Run.objects.values_list("pk", "status"))
    assert statuses[finished.pk] == "succeeded"
    assert statuses[waiting.pk] == "cancelled"
    assert statuses[recent.pk] == "running"
    assert waiting.approvals.get().status == "cancelled"
    # Nothing left to end: a second sweep changes nothing.
    assert end_idle_sessions() == {"completed": 0, "cancelled": 0}
