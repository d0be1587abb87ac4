"""Airline tools run by agentops' workers (tests only): ``book_reservation`` and
``update_reservation_baggages`` as registered tools, and ``revert_write``, the compensation
``runs.tools.tau_bench`` declares for every airline write. Each acts on the run's own world of
the test airline database (``world_of``: made from the data files at its first call), under
its step's idempotency key (as a client does with ``examples.airline.tools.call``).

A worker started with ``AIRLINE_PAUSE_AFTER_REVERT_SECONDS`` set waits that long after each
``revert_write`` took effect and before it answers: a test kills it there.
"""

from __future__ import annotations

import os
import time
from functools import cache
from typing import Any

import tests.tools  # noqa: F401  (registers the test tools: test_crash fails a run)
from examples.airline import revert, tools
from examples.airline.store import Store
from runs.tools import ErrorPrefix, ToolContext, register
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA

PAUSE_AFTER_REVERT = "AIRLINE_PAUSE_AFTER_REVERT_SECONDS"


@cache
def _store() -> Store:
    # Opened on first use: in a worker, inside the pool process that calls the tool.
    return Store(AIRLINE_DSN, DATA)


def world_of(run_id: Any) -> str:
    """The airline world of the run ``run_id``."""
    return f"run:{run_id}"


def _world(ctx: ToolContext) -> str:
    world = world_of(ctx.run_id)
    _store().create_world(world)
    return world


def _write(name: str) -> Any:
    def call(args: dict[str, Any], ctx: ToolContext) -> str:
        return tools.call(_store(), _world(ctx), name, args, idempotency_key=ctx.idempotency_key)

    return call


for _name in ("book_reservation", "update_reservation_baggages"):
    register(
        _name,
        description=f"τ-bench's {_name} on the run's airline world (tests only).",
        risk="high",
        side_effects=True,
        idempotent=True,
        timeout_seconds=10,
        error_when=ErrorPrefix("Error:"),
    )(_write(_name))


@register(
    revert.TOOL,
    description="Undo the airline write recorded under idempotency_key (tests only).",
    schema=revert.SCHEMA,
    risk="high",
    side_effects=True,
    idempotent=True,
    timeout_seconds=5,
    error_when=ErrorPrefix("Error:"),
)
def revert_write(args: dict[str, Any], ctx: ToolContext) -> str:
    output = revert.revert_write(
        _store(), _world(ctx), args["idempotency_key"], idempotency_key=ctx.idempotency_key
    )
    time.sleep(float(os.environ.get(PAUSE_AFTER_REVERT, "0")))
    return output
