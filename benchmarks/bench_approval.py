"""Approval latency: a reviewer's approval → the approved step running.

``runs`` plan runs whose only step is ``send_email`` (high risk: one approval) wait in the
inbox; with two idle workers, a reviewer approves them one every ``interval`` seconds through
``approvals.services.approval_decide``. Each latency is the step's ``started_at`` (taken by the
worker's claim) - the wall-clock time just before the call. The baseline sends one bare no-op
task on the same schedule: send → start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.bench_throughput import wait_runs
from benchmarks.data import bench_users
from benchmarks.harness import Bench, chain_latencies, paced
from benchmarks.table import Figure, Sample, Target
from testsupport.statistics import percentile

NAME = "approval"


@dataclass(frozen=True)
class Size:
    runs: int
    interval: float


SIZES = {"tiny": Size(runs=3, interval=0.1), "full": Size(runs=40, interval=0.1)}

FIGURES = [
    Figure("p50", "approve → step running, p50", "ms"),
    Figure("p99", "approve → step running, p99", "ms", (Target("<=", 100),)),
]

EMAIL = {
    "tool": "send_email",
    "args": {"to": ["ops@example.com"], "subject": "benchmark", "body": "approved"},
}


def approval_latencies(size: Size) -> list[float]:
    """Create the runs, approve them on schedule; returns each approve → running in ms."""
    from agentops.actors import Actor
    from approvals.models import ApprovalRequest
    from approvals.services import approval_decide
    from runs.control.create import run_create
    from runs.models import Step

    reviewer = Actor.for_user(bench_users()["reviewer"])
    system = Actor.system("bench")
    ids = [
        str(run_create(actor=system, agent="plan", goal=f"mail {i}", steps=[EMAIL]).pk)
        for i in range(size.runs)
    ]
    wait_runs(ids, "waiting", timeout=60 + size.runs)
    approvals = {
        str(run_id): pk
        for run_id, pk in ApprovalRequest.objects.filter(run_id__in=ids).values_list("run_id", "pk")
    }
    decided_at: dict[int, float] = {}
    for i in paced(len(ids), size.interval):
        approval_id = approvals[ids[i]]
        decided_at[approval_id] = time.time()
        approval_decide(approval_id=approval_id, actor=reviewer, decision="approve")
    wait_runs(ids, "succeeded", timeout=60 + size.runs)
    started = Step.objects.filter(run_id__in=ids).values_list("approval__pk", "started_at")
    return [(at.timestamp() - decided_at[pk]) * 1000 for pk, at in started]


def run(bench: Bench) -> Iterator[Sample]:
    size = SIZES[bench.size]
    for _ in range(bench.repeat):
        bench.start_workers(2)
        latencies = approval_latencies(size)
        base = chain_latencies(bench, size.runs, 1, size.interval)
        for q in (50, 99):
            yield Sample(f"p{q}", percentile(latencies, q), percentile(base, q))
