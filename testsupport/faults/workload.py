"""The workload of the fault-injection harness: plan runs of effect and hang steps, created
through the services, and how far they have got."""

from __future__ import annotations

import random
from typing import Any

from django.db.models import Q

from agentops.actors import Actor
from runs.models import RUN_TERMINAL, STEP_TERMINAL, Run, Step, StepStatus
from testsupport.faults.tools import EFFECT, HANG, IDEMPOTENT_EFFECT


def plan_workload(
    *, runs: int, steps: int, seed: int, hang_share: float
) -> list[list[dict[str, Any]]]:
    """The step specs of each of ``runs`` runs of ``steps`` steps, the same for the same
    arguments: each step calls the hang tool with probability ``hang_share`` (hanging past its
    timeout on its first attempt, or on its first two), else one of the two effect tools at
    even odds. The invariants rebuild the plan from the seed to know what each run must do."""
    rng = random.Random(seed)
    plan = []
    for i in range(runs):
        specs: list[dict[str, Any]] = []
        for j in range(steps):
            if rng.random() < hang_share:
                specs.append({"tool": HANG, "args": {"hangs": rng.choice([1, 1, 1, 2])}})
            else:
                tool = rng.choice([EFFECT, IDEMPOTENT_EFFECT])
                specs.append({"tool": tool, "args": {"label": f"run {i} step {j}"}})
        plan.append(specs)
    return plan


def goal_of(index: int) -> str:
    """The goal of the workload's run number ``index`` (how the invariants find it)."""
    return f"fault injection run {index}"


def create_workload(*, runs: int, steps: int, seed: int, hang_share: float) -> None:
    """Create the runs of ``plan_workload`` as ``Actor.system("harness")``.

    Run in a child process with the cluster's ``REDIS_URL`` (``Cluster.run_child``), so that
    the runs' start messages reach the cluster's workers.
    """
    from runs.control.create import run_create

    actor = Actor.system("harness")
    plan = plan_workload(runs=runs, steps=steps, seed=seed, hang_share=hang_share)
    for i, specs in enumerate(plan):
        run_create(
            actor=actor,
            agent="plan",
            goal=goal_of(i),
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
