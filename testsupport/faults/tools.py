"""Tools for the fault-injection harness, registered on import.

Worker processes load them with ``celery -A agentops worker -I testsupport.faults.tools``. The
effect tools write their side effect to the ``fault_effects`` table (created by the harness, with no
unique constraint) through the tool thread's own autocommit connection, outside the step's
transactions, so the ledger cannot see it and a repeated effect shows up as a second row. Each
call sleeps a random 50-400 ms around its effect, so a kill can land before or after it.
"""

from __future__ import annotations

import random
import time
from typing import Any

from django.db import DatabaseError, connection, transaction

from runs.tools import ToolContext, ToolError, register

EFFECT = "fault_effect"
IDEMPOTENT_EFFECT = "fault_effect_idempotent"
HANG = "fault_hang"
EFFECT_TOOLS = (EFFECT, IDEMPOTENT_EFFECT)
EFFECTS_TABLE = "fault_effects"

_LABEL_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "maxLength": 100}},
    "additionalProperties": False,
}


def _pause() -> None:
    # Half of 50-400 ms before the effect, half after.
    time.sleep(random.uniform(0.025, 0.2))


def _check_lease(ctx: ToolContext) -> None:
    if not ctx.heartbeat():
        # The step was recovered or cancelled: this attempt must not act any more.
        raise ToolError("the step's lease was lost before the effect", type="lease_lost")


@register(
    EFFECT,
    description="Records one side effect per call; not idempotent (fault-injection tests only).",
    schema=_LABEL_SCHEMA,
    side_effects=True,
    timeout_seconds=3,
)
def effect(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _pause()
    _check_lease(ctx)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {EFFECTS_TABLE} (key, step_id) VALUES (%s, %s)",  # noqa: S608
                [ctx.idempotency_key, ctx.step_id],
            )
    except DatabaseError as exc:
        # The connection broke during the INSERT: it may or may not have committed, and this
        # tool cannot find out, so it must not be called again.
        raise ToolError(f"effect outcome unknown: {exc}", type="outcome_unknown") from exc
    _pause()
    return {"key": ctx.idempotency_key, "attempt": ctx.attempt}


@register(
    IDEMPOTENT_EFFECT,
    description="Records one side effect per idempotency key, however often it is called "
    "(fault-injection tests only).",
    schema=_LABEL_SCHEMA,
    side_effects=True,
    idempotent=True,
    timeout_seconds=3,
    max_attempts=5,
)
def idempotent_effect(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _pause()
    _check_lease(ctx)
    # Deduplicate by key as an outside system would; the advisory lock makes two concurrent
    # attempts (a recovered step whose first worker still runs) see each other's row.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", [ctx.idempotency_key]
        )
        cursor.execute(
            f"INSERT INTO {EFFECTS_TABLE} (key, step_id) SELECT %s, %s "  # noqa: S608
            f"WHERE NOT EXISTS (SELECT 1 FROM {EFFECTS_TABLE} WHERE key = %s)",
            [ctx.idempotency_key, ctx.step_id, ctx.idempotency_key],
        )
    _pause()
    return {"key": ctx.idempotency_key, "attempt": ctx.attempt}


@register(
    HANG,
    description="Sleeps past its 1 s timeout on attempts up to args.hangs, then returns "
    "(fault-injection tests only).",
    schema={
        "type": "object",
        "properties": {"hangs": {"type": "integer", "minimum": 0}},
        "required": ["hangs"],
        "additionalProperties": False,
    },
    timeout_seconds=1,
    max_attempts=3,
)
def hang(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    if ctx.attempt <= args["hangs"]:
        time.sleep(ctx.timeout_seconds + 2)
    return {"attempt": ctx.attempt}
