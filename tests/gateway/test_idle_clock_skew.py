"""The idle cutoff of MCP sessions is taken from the database's clock: beat on a host whose
clock is a minute ahead does not end a session its client used a moment ago."""

from __future__ import annotations

import pytest

from agentops.actors import Actor
from gateway.calls import sessions_end_idle
from runs.control.create import run_create
from runs.models import Run
from testsupport.clock import clock_off_by

pytestmark = pytest.mark.django_db


def test_beat_whose_clock_is_ahead_keeps_a_session_used_a_moment_ago(
    operator, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=Actor.for_user(operator), agent="mcp", goal="MCP session")
    assert Run.objects.get(pk=run.pk).status == "running"
    with clock_off_by(60), django_capture_on_commit_callbacks(execute=True):
        ended = sessions_end_idle(idle_seconds=30, actor=Actor.system("beat"))
    assert ended == {"completed": 0, "cancelled": 0}
    assert Run.objects.get(pk=run.pk).status == "running"
