"""Long runs for the run page's tests and benchmark: a run's steps and model turns written in
bulk (two statements a table), since running a thousand steps through the executor takes
minutes and the page reads only what they leave."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Value

from runs.models import ModelCall, Run, Step
from runs.statuses import StepStatus

# Each step starts this long after the one before it, runs STEP_MS, and every GATED-th waited
# GATE_MS at a gate first; a model turn of MODEL_MS ends just before every MODEL_EVERY-th.
STEP_GAP_MS = 1000
STEP_MS = 200
GATE_MS = 600
GATED = 7
MODEL_MS = 300
MODEL_EVERY = 5


def status_of(index: int) -> tuple[str, bool]:
    """The status of step ``index`` of a long run, and whether it is a tool error: every 50th
    (from 13) failed, every 50th (from 37) a tool error, the rest succeeded."""
    if index % 50 == 13:
        return StepStatus.FAILED, False
    return StepStatus.SUCCEEDED, index % 50 == 37


def add_steps(*, run: Run, count: int, value: Any, start: datetime) -> None:
    """Add ``count`` finished steps (``echo`` calls of ``value``, its result the same value as
    JSON text, as a client run reports a tool's output) and a model turn before every
    ``MODEL_EVERY``-th to ``run``, the first starting at ``start``; statuses by ``status_of``.
    """
    steps = []
    result = json.dumps({"value": value})
    for index in range(count):
        status, tool_error = status_of(index)
        began = start + timedelta(milliseconds=index * STEP_GAP_MS)
        args = {"value": value, "step": index}
        failed = status == StepStatus.FAILED
        steps.append(
            Step(
                run=run,
                index=index,
                tool="echo",
                args=args,
                args_hash=Step.args_digest(args),
                idempotency_key=f"{run.pk}:{index}:echo:{Step.args_digest(args)}",
                risk="low",
                status=status,
                tool_error=tool_error,
                gate="approval" if index % GATED == 0 else "",
                attempts=2 if failed else 1,
                result=None if failed else result,
                error={"type": "timeout", "message": "no answer in 60 s"} if failed else None,
                usage={"input_tokens": 1200 + index, "output_tokens": 80, "cost_usd": 0.002},
                started_at=began,
                finished_at=began + timedelta(milliseconds=STEP_MS),
                tool_call_id=f"call_{index:04d}",
            )
        )
    Step.objects.bulk_create(steps, batch_size=500)
    Step.objects.filter(run=run).update(created_at=F("started_at"))
    Step.objects.filter(run=run, gate="approval").update(
        created_at=F("started_at") - timedelta(milliseconds=GATE_MS)
    )
    calls = [
        ModelCall(
            run=run,
            model="gpt-4o-mini",
            input_tokens=900,
            output_tokens=40,
            latency_ms=MODEL_MS,
            first_message=index,
            messages=1,
        )
        for index in range(0, count, MODEL_EVERY)
    ]
    ModelCall.objects.bulk_create(calls, batch_size=500)
    # Each turn ends 50 ms before the step it chose starts.
    gap = Value(timedelta(milliseconds=STEP_GAP_MS), output_field=DurationField())
    ended = Value(start - timedelta(milliseconds=50), output_field=DateTimeField())
    ModelCall.objects.filter(run=run).update(
        created_at=ExpressionWrapper(ended + F("first_message") * gap, DateTimeField())
    )
