"""Retention deletes an MCP session's run with its session (``gateway.retention``): the
session row would otherwise keep the run's deletion from committing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agentops.actors import Actor
from gateway import calls
from gateway.models import McpSession
from gateway.services import upstream_register
from projects.services import project_default
from runs.control.lifecycle import run_complete
from runs.models import RetentionPolicy, Run
from runs.retention import retention_purge

pytestmark = pytest.mark.django_db

READ = {"name": "lookup", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}


def test_an_expired_session_run_is_deleted_with_its_session(operator: Any) -> None:
    upstream = upstream_register(name="bank", command="true")
    actor = Actor.for_user(operator, via_api=True)
    opened: dict[str, Any] = {
        "upstream": upstream,
        "actor": actor,
        "project_id": project_default().pk,
    }
    runs = []
    for session_id in ("old", "recent"):
        run_id = calls.session_run(session_id=session_id, client_info=None, **opened)
        step = calls.call_step(run_id=run_id, actor=actor, tool="lookup", args={}, spec=READ)
        calls.step_outcome(actor=actor, step=step, report={"result": {"content": []}})
        run_complete(run_id=run_id, actor=actor)
        runs.append(run_id)
    old, recent = runs
    Run.objects.filter(pk=old).update(finished_at=timezone.now() - timedelta(days=40))
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)

    report = retention_purge(actor=Actor.system("test"))

    assert report["runs"] == 1
    assert not Run.objects.filter(pk=old).exists()
    assert list(McpSession.objects.values_list("session_id", flat=True)) == ["recent"]
    assert Run.objects.filter(pk=recent).exists()
