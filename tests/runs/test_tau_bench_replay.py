"""The whole τ-bench airline set replayed on a real Celery worker, with a reviewer approving.

Every conversation becomes a transcript run; reads run straight through, every write
(``book_*``, ``cancel_*``, ``update_*``, ``send_*``, ``transfer_*`` ...) waits for a reviewer.
After all approvals each step holds the recorded tool output verbatim and the audit log holds
exactly one event per transition, in intact hash chains.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Count

from agentops.actors import Actor
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from approvals.services import approval_decide
from audit.models import AuditEvent
from audit.selectors import chain_verify
from runs.models import Run, RunStatus, StepStatus
from tests.conftest import DATA_DIR, wait_for

pytestmark = pytest.mark.worker

TRAJECTORIES = DATA_DIR / "trajectories.json"
TIMEOUT_SECONDS = 300


def recorded_calls(traj: list[dict]) -> list[tuple[str, str]]:
    """(tool name, recorded output) of every tool call, in order (τ-bench answers each call
    before the next one, so the n-th tool message answers the n-th call)."""
    names = [c["function"]["name"] for m in traj for c in m.get("tool_calls") or []]
    outputs = [m["content"] for m in traj if m["role"] == "tool"]
    assert len(names) == len(outputs)
    return list(zip(names, outputs, strict=True))


# The airline tools that change bookings or send something, written out (tools.json of the
# data set), not derived from the risk rules under test.
WRITES = {
    "book_reservation",
    "cancel_reservation",
    "send_certificate",
    "transfer_to_human_agents",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
}


def is_write(tool: str) -> bool:
    return tool in WRITES


def expected_events(calls: list[tuple[str, str]]) -> Counter[str]:
    """One audit event per transition of a run whose writes were each approved once."""
    steps = len(calls)
    writes = sum(is_write(tool) for tool, _ in calls)
    return +Counter(  # unary + drops the zero counts of runs without writes
        {
            "run.created": 1,
            "run.running": 1 + writes,  # started, then continued after each approval
            "run.awaiting_approval": writes,
            "run.succeeded": 1,
            "step.created": steps,
            "step.queued": steps,
            "step.running": steps,
            "step.succeeded": steps,
            "step.awaiting_approval": writes,
            "approval.created": writes,
            "approval.decision": writes,
            "approval.approved": writes,
        }
    )


def fail_on_broken_runs() -> None:
    broken = Run.objects.filter(status__in=[RunStatus.FAILED, RunStatus.CANCELLED])
    if broken.exists():
        run = broken.first()
        raise AssertionError(f"run {run.pk} ended {run.status}: {run.error}")


def test_replaying_tau_bench_airline_with_a_reviewer(worker, operator, reviewer, record_property):
    data = json.loads(TRAJECTORIES.read_text())
    calls = {(item["task_id"], item["trial"]): recorded_calls(item["traj"]) for item in data}
    assert len(calls) == len(data) == 100

    started = time.monotonic()
    out = StringIO()
    call_command("import_transcripts", str(TRAJECTORIES), "--user", operator.username, stdout=out)
    assert "imported 100 of 100 conversations" in out.getvalue()
    imported = time.monotonic() - started
    runs = {(r.metadata["task_id"], r.metadata["trial"]): r for r in Run.objects.all()}
    assert runs.keys() == calls.keys()

    # Phase 1: every run goes as far as it can without a reviewer.
    settled = [RunStatus.SUCCEEDED, RunStatus.WAITING]

    def all_settled() -> bool:
        fail_on_broken_runs()
        return not Run.objects.exclude(status__in=settled).exists()

    wait_for(all_settled, timeout=TIMEOUT_SECONDS, interval=0.5)
    for key, run in runs.items():
        run = Run.objects.get(pk=run.pk)
        steps = list(run.steps.order_by("index"))
        first_write = next((i for i, (tool, _) in enumerate(calls[key]) if is_write(tool)), None)
        if first_write is None:
            assert run.status == RunStatus.SUCCEEDED, key
            assert {s.status for s in steps} <= {StepStatus.SUCCEEDED}, key
            continue
        assert run.status == RunStatus.WAITING, key
        assert [s.status for s in steps] == (
            [StepStatus.SUCCEEDED] * first_write
            + [StepStatus.WAITING]
            + [StepStatus.PENDING] * (len(steps) - first_write - 1)
        ), key
        assert steps[first_write].approval.status == ApprovalStatus.PENDING

    # Phase 2: a reviewer who did not request the runs approves until every run is done.
    actor = Actor.for_user(reviewer)
    approved = 0

    def approve_pending() -> bool:
        nonlocal approved
        fail_on_broken_runs()
        pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
        for approval_id in pending.values_list("pk", flat=True):
            approval_decide(approval_id=approval_id, actor=actor, decision="approve")
            approved += 1
        return not Run.objects.exclude(status=RunStatus.SUCCEEDED).exists()

    wait_for(approve_pending, timeout=TIMEOUT_SECONDS, interval=0.2)
    wall = time.monotonic() - started

    total_steps = sum(len(c) for c in calls.values())
    writes = sum(is_write(tool) for c in calls.values() for tool, _ in c)
    assert approved == writes
    assert ApprovalDecision.objects.filter(reviewer=reviewer, decision="approve").count() == writes

    for key, run in runs.items():
        steps = list(run.steps.order_by("index"))
        assert [(s.tool, s.result) for s in steps] == calls[key], key
        assert {(s.status, s.attempts) for s in steps} <= {(StepStatus.SUCCEEDED, 1)}, key
        # A recorded refusal ("Error: ...") replays as a tool error, nothing else does.
        refused = [output.startswith("Error:") for _, output in calls[key]]
        assert [s.tool_error for s in steps] == refused, key

    by_run: dict[object, Counter[str]] = {run.pk: Counter() for run in runs.values()}
    rows = (
        AuditEvent.objects.filter(run_id__in=by_run)
        .values("run_id", "verb")
        .annotate(n=Count("id"))
    )
    for row in rows:
        by_run[row["run_id"]][row["verb"]] = row["n"]
    for key, run in runs.items():
        assert by_run[run.pk] == expected_events(calls[key]), key
        assert chain_verify(f"run:{run.pk}").ok, key
    verified = StringIO()
    call_command("verify_audit", stdout=verified)
    assert "verified 101 chains" in verified.getvalue()  # the runs' and the system chain
    assert "0 broken" in verified.getvalue()

    figures = {
        "runs": len(runs),
        "steps": total_steps,
        "approvals": writes,
        "import_seconds": round(imported, 2),
        "wall_seconds": round(wall, 2),
        "steps_per_second": round(total_steps / wall, 1),
    }
    for name, value in figures.items():
        record_property(name, value)
    print(f"\nτ-bench replay on a 2-process worker: {figures}")
