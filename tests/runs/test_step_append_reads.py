"""Appending a step reads a bounded number of the run's step rows, however many steps the run
already has: a long MCP session appends one step per tool call, and each append must not read
all the calls before it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentops.actors import Actor
from runs.control.create import run_create, step_append
from runs.models import Step, StepStatus

pytestmark = pytest.mark.django_db

EARLIER_STEPS = 300


def _rows_read_from_steps(plan: dict[str, Any]) -> int:
    """The rows the scans of ``runs_step`` in an EXPLAIN ANALYZE plan (JSON) gave, in all."""
    own = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)
    scans = plan.get("Relation Name") == "runs_step" or "step" in plan.get("Index Name", "")
    below = sum(_rows_read_from_steps(child) for child in plan.get("Plans", []))
    return (own if scans else 0) + below


def test_appending_to_a_long_run_reads_a_few_of_its_steps_and_numbers_the_new_one_next(
    operator, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=actor, agent="client", goal="a long session")
    Step.objects.bulk_create(
        Step(
            run=run,
            index=index,
            tool="lookup",
            args={"n": index},
            executor="client",
            idempotency_key=f"{run.pk}:{index}",
            status=StepStatus.SUCCEEDED,
        )
        for index in range(EARLIER_STEPS)
    )

    with CaptureQueriesContext(connection) as queries:
        step = step_append(
            actor=actor, run_id=run.pk, tool="lookup", args={"n": 1}, executor="client"
        )

    assert step.index == 300
    assert Step.objects.filter(run=run).count() == 301
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().startswith("SELECT") and "runs_step" in q["sql"]
    ]
    assert reads, "the append read nothing of the run's steps"
    read = 0
    with connection.cursor() as cursor:
        for sql in reads:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
            ((plan,),) = cursor.fetchall()
            read += _rows_read_from_steps(plan[0]["Plan"])
    # The newest index entry of the run and its first open step (the new one): a handful of
    # rows. Counting the steps would read all 301.
    assert read <= 5, f"{read} step rows read by {reads}"
