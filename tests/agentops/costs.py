"""What the executor's transactions cost, as libpq's trace counts it
(``testsupport.roundtrips``), for the tests of batches inside another transaction and on
their own."""

from __future__ import annotations

import uuid

from django.db import connection

from agentops.actors import Actor
from runs.control.create import run_create, step_append
from runs.executor.client import step_report
from runs.executor.entry import run_advance
from runs.models import Executor, Run, StepStatus
from testsupport.roundtrips import RoundTrips, round_trips


def recorded_run(steps: int) -> RoundTrips:
    """A plan run of ``steps`` echo steps created, then run by this process as a worker:
    what running it cost (it must succeed)."""
    started = run_create(
        actor=Actor.system("test"),
        agent="plan",
        goal="round trips",
        steps=[{"tool": "echo", "args": {"value": 1}}] * steps,
    )
    connection.ensure_connection()
    with round_trips(connection) as trips:
        run_advance(run_id=started.pk, actor=Actor.worker(), execute=True)
    assert Run.objects.get(pk=started.pk).status == "succeeded"
    return trips


def client_call(actor: Actor, run_id: uuid.UUID, n: int) -> RoundTrips:
    """One low-risk client step (arguments ``{"n": n}``) appended to the client run
    ``run_id`` and its result ``n`` reported, as the MCP gateway does for each call: what
    the two cost."""
    connection.ensure_connection()
    with round_trips(connection) as trips:
        step = step_append(
            actor=actor,
            run_id=run_id,
            tool="lookup",
            args={"n": n},
            executor=Executor.CLIENT,
            declared_risk="low",
            tool_call_id=f"call-{n}",
            reuse_open_call=True,
        )
        assert step.status == StepStatus.READY
        step_report(actor=actor, run_id=run_id, step_id=step.pk, report={"result": n})
    return trips
