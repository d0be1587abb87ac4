"""Tools for the fault-injection harness, registered on import.

Worker processes load them with ``celery -A agentops worker -I testsupport.faults.tools``. The
effect tools record each call's side effect with the independent recorder
(``testsupport.faults.recorder``: its own connection and table), and do nothing to protect
themselves: they neither check their lease nor look for an earlier effect, so every repeated
call the executor makes shows up as another recorded effect. Each call sleeps a random
50-400 ms around its effect, so a kill can land before or after it.
"""

from __future__ import annotations

import random
import time
from typing import Any

import psycopg

from runs.tools import ToolContext, ToolError, register
from testsupport.faults import recorder

EFFECT = "fault_effect"
IDEMPOTENT_EFFECT = "fault_effect_idempotent"
HANG = "fault_hang"
EFFECT_TOOLS = (EFFECT, IDEMPOTENT_EFFECT)
# Attempts of the tools that are safe to repeat: enough that no run of the harness exhausts
# them, so such a step must always end succeeded.
REPEATABLE_ATTEMPTS = 20

_LABEL_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "maxLength": 100}},
    "additionalProperties": False,
}


def _pause() -> None:
    # Half of 50-400 ms before the effect, half after.
    time.sleep(random.uniform(0.025, 0.2))


def _effect(ctx: ToolContext, tool: str, *, repeatable: bool) -> dict[str, Any]:
    _pause()
    try:
        recorder.record(key=ctx.idempotency_key, step_id=ctx.step_id, tool=tool)
    except psycopg.Error as exc:
        # The connection broke during the INSERT: it may or may not have committed, and this
        # tool cannot find out, as a real outside system often cannot. Only a tool whose
        # calls are safe to repeat may be tried again.
        raise ToolError(
            f"effect outcome unknown: {exc}", type="outcome_unknown", retryable=repeatable
        ) from exc
    _pause()
    return {"key": ctx.idempotency_key, "attempt": ctx.attempt}


@register(
    EFFECT,
    description="Records one side effect per call; not idempotent (fault-injection tests only).",
    schema=_LABEL_SCHEMA,
    side_effects=True,
    timeout_seconds=3,
)
def effect(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return _effect(ctx, EFFECT, repeatable=False)


@register(
    IDEMPOTENT_EFFECT,
    description="Records one side effect per call; repeating it is harmless (fault-injection "
    "tests only).",
    schema=_LABEL_SCHEMA,
    side_effects=True,
    idempotent=True,
    timeout_seconds=3,
    max_attempts=REPEATABLE_ATTEMPTS,
)
def idempotent_effect(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return _effect(ctx, IDEMPOTENT_EFFECT, repeatable=True)


@register(
    HANG,
    description="Sleeps past its 1 s timeout on attempts up to args.hangs, then returns; safe "
    "to repeat (fault-injection tests only).",
    schema={
        "type": "object",
        "properties": {"hangs": {"type": "integer", "minimum": 0}},
        "required": ["hangs"],
        "additionalProperties": False,
    },
    idempotent=True,
    timeout_seconds=1,
    max_attempts=REPEATABLE_ATTEMPTS,
)
def hang(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    if ctx.attempt <= args["hangs"]:
        time.sleep(ctx.timeout_seconds + 2)
    return {"attempt": ctx.attempt}
