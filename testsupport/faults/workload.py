"""The workload of the fault-injection harness: plan runs of effect and hang steps, created
through the services, and how far they have got."""

from __future__ import annotations

import random
from typing import Any

from django.db import connection
from django.db.models import Q

from agentops.actors import Actor
from runs.models import RUN_TERMINAL, STEP_TERMINAL, Run, Step, StepStatus
from testsupport.faults.tools import EFFECT, EFFECTS_TABLE, HANG, IDEMPOTENT_EFFECT


def ensure_effects_table() -> None:
    """Create the ``fault_effects`` table (no unique constraint, on purpose) and empty it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {EFFECTS_TABLE} "
            "(key text NOT NULL, step_id bigint NOT NULL, at timestamptz NOT NULL DEFAULT now())"
        )
        cursor.execute(f"TRUNCATE {EFFECTS_TABLE}")


def create_workload(*, runs: int, steps: int, seed: int, hang_share: float) -> None:
    """Create ``runs`` plan runs of ``steps`` steps as ``Actor.system("harness")``.

    Each step calls the hang tool with probability ``hang_share`` (hanging on its first
    attempt, or on all three), else one of the two effect tools at even odds. Run in a child
    process with the cluster's ``REDIS_URL`` (``Cluster.run_child``), so that the runs' start
    messages reach the cluster's workers.
    """
    from runs.control.create import run_create

    rng = random.Random(seed)
    actor = Actor.system("harness")
    for i in range(runs):
        specs: list[dict[str, Any]] = []
        for j in range(steps):
            if rng.random() < hang_share:
                specs.append({"tool": HANG, "args": {"hangs": rng.choice([1, 1, 1, 3])}})
            else:
                tool = rng.choice([EFFECT, IDEMPOTENT_EFFECT])
                specs.append({"tool": tool, "args": {"label": f"run {i} step {j}"}})
        run_create(
            actor=actor,
            agent="plan",
            goal=f"fault injection run {i}",
            steps=specs,
            metadata={"harness": "faults"},
        )


def settled_share() -> float:
    """Share of all steps that are settled: terminal, or pending under a terminal run."""
    total = Step.objects.count()
    if not total:
        return 0.0
    settled = Step.objects.filter(
        Q(status__in=STEP_TERMINAL) | Q(status=StepStatus.PENDING, run__status__in=RUN_TERMINAL)
    ).count()
    return settled / total


def open_runs() -> int:
    """How many runs are not terminal yet."""
    return Run.objects.exclude(status__in=RUN_TERMINAL).count()
