"""Twenty τ-bench airline conversations replayed by OpenAI Agents SDK agents that reach the
airline tools only through the agentops MCP gateway (``/mcp/airline/``): every output the
agents receive equals the recording, every write was approved by a second user, and each
session is one run whose steps are its calls, each write forwarded once."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from examples.airline.mcp_replay import replay
from examples.airline.replay import recorded_calls
from gateway.services import upstream_register
from runs.models import Run, Step
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA, TRAJECTORIES, WRITES
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.long, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CONVERSATIONS = 20


def test_twenty_conversations_through_the_gateway_replay_exactly(worker, asgi_server, seeded):
    upstream_register(
        name="airline",
        command=f"{sys.executable} -m examples.airline.mcp_server "
        f"--airline-db {AIRLINE_DSN} --data-dir {DATA}",
    )
    agent = make_user("mcp-agent", "operator")
    reviewer = make_user("mcp-reviewer", "reviewer")
    report = asyncio.run(
        replay(
            TRAJECTORIES,
            url=asgi_server.url,
            token=make_token(agent),
            reviewer_token=make_token(reviewer),
            limit=CONVERSATIONS,
            concurrency=4,
        )
    )
    print(report.summary())
    assert [m for c in report.conversations for m in c.mismatches] == []
    # A session is a run from its first call: conversations that call no tool make none.
    recorded = json.loads(TRAJECTORIES.read_text())[:CONVERSATIONS]
    calling = [c for c in recorded if recorded_calls(c["traj"])]
    runs = Run.objects.filter(agent="mcp")
    assert runs.count() == len(calling)
    assert report.calls == sum(len(recorded_calls(c["traj"])) for c in recorded)
    steps = Step.objects.filter(run__in=runs)
    assert steps.count() == report.calls
    # The recorded refusals ("Error: ...") came back with isError: their steps, and only
    # those, are tool errors.
    refusals = [
        output.startswith("Error:") for c in calling for _, _, output in recorded_calls(c["traj"])
    ]
    assert steps.filter(tool_error=True).count() == sum(refusals) > 0
    writes = steps.filter(tool__in=WRITES)
    assert writes.exists()
    assert set(writes.values_list("status", flat=True)) == {"succeeded"}
    # Every write waited for the reviewer: one approval each, decided by them.
    for step in writes.select_related("approval"):
        assert step.approval.decisions.get().reviewer == reviewer
