"""What must hold after the faults: the invariants of the harness, checked on the database once
every process has stopped, and the figures it reports."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from audit.models import AuditEvent
from audit.selectors import audit_verify
from runs.models import (
    RUN_TERMINAL,
    STEP_TERMINAL,
    AttemptStatus,
    CallStatus,
    Run,
    RunStatus,
    Step,
    StepAttempt,
    StepStatus,
    ToolCall,
)
from testsupport.faults import recorder
from testsupport.faults.tools import EFFECT, EFFECT_TOOLS
from testsupport.faults.workload import goal_of
from testsupport.statistics import p50_p99


@dataclass
class Report:
    """What a harness run measured (``figures``, in display order) and which invariants failed
    (``failures``, one line each; empty when all held)."""

    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def table(self) -> str:
        """The figures as a two-column text table, then the failed invariants."""
        width = max(len(name) for name in self.figures)
        lines = [f"{name:<{width}}  {value}" for name, value in self.figures.items()]
        lines.append("")
        lines.append("invariants: " + ("all hold" if self.ok else "FAILED"))
        lines += [f"  - {failure}" for failure in self.failures]
        return "\n".join(lines)


def _audit_mismatches(steps: list[Step], runs: list[Run]) -> list[str]:
    """Objects whose audit events do not form one chain of transitions from creation to the
    current status, or (steps) whose running events differ from their attempts."""
    history: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for object_type, object_id, from_state, to_state in (
        AuditEvent.objects.filter(object_type__in=["run", "step"])
        .order_by("id")
        .values_list("object_type", "object_id", "from_state", "to_state")
    ):
        history[object_type, object_id].append((from_state, to_state))
    attempts = Counter(StepAttempt.objects.values_list("step_id", flat=True))
    bad = []
    objects: list[tuple[str, Any, str]] = [("run", r.pk, r.status) for r in runs]
    objects += [("step", s.pk, s.status) for s in steps]
    for object_type, pk, status in objects:
        events = history.get((object_type, str(pk)), [])
        state: str | None = ""
        for from_state, to_state in events:
            # The first event creates the object (from ""); each later one changes its status.
            if from_state != state or from_state == to_state:
                state = None
                break
            state = to_state
        if state != status:
            bad.append(f"{object_type} {pk}: events {events} do not lead to {status}")
    for step in steps:
        running = sum(1 for _, to in history.get(("step", str(step.pk)), []) if to == "running")
        if not running == step.attempts == attempts[step.pk]:
            bad.append(
                f"step {step.pk}: {running} running events, {step.attempts} attempts, "
                f"{attempts[step.pk]} attempt rows"
            )
    return bad


def _recovery_seconds(
    kill_times: dict[tuple[int, int], datetime],
) -> tuple[list[float], list[float]]:
    """For each lost attempt, seconds from its loss (the harness's kill of its process, or its
    start when the harness did not kill that process) to the sweeper marking it lost
    (detection), and to the next attempt's start or, failing that, its step's end (recovery)."""
    starts = {
        (step_id, number): started
        for step_id, number, started in StepAttempt.objects.values_list(
            "step_id", "number", "started_at"
        )
    }
    ends = dict(Step.objects.values_list("pk", "finished_at"))
    detected, recovered = [], []
    for step_id, number, started, marked in StepAttempt.objects.filter(
        status=AttemptStatus.LOST
    ).values_list("step_id", "number", "started_at", "finished_at"):
        lost_at = kill_times.get((step_id, number), started)
        if marked is not None:
            detected.append((marked - lost_at).total_seconds())
        resumed_at = starts.get((step_id, number + 1)) or ends.get(step_id)
        if resumed_at is not None:
            recovered.append((resumed_at - lost_at).total_seconds())
    return detected, recovered


def _effect_failures(steps: list[Step], effects: Counter[str]) -> list[str]:
    """Side effects (as the recorder saw them) that the steps' outcomes forbid: a call of the
    tool that is not idempotent made twice, a succeeded step of an effect tool without its
    effect (or, not idempotent, with two), an effect of a step never attempted."""
    bad = []
    for step in steps:
        n = effects[step.idempotency_key]
        if step.tool == EFFECT and n > 1:
            bad.append(f"step {step.pk} ({EFFECT}, not idempotent) took effect {n} times")
        if step.tool in EFFECT_TOOLS and step.status == StepStatus.SUCCEEDED and n < 1:
            bad.append(f"succeeded step {step.pk} has no effect")
        if step.attempts == 0 and n:
            bad.append(f"step {step.pk} never attempted has {n} effects")
    return bad


def _plan_outcomes(
    runs: list[Run], steps: list[Step], expected_plan: list[list[dict[str, Any]]]
) -> tuple[Counter[str], list[str]]:
    """Each run's end against the workload's own plan: every run exists with its planned
    tools and ends ``succeeded``, except that a run may fail at a step of the tool that is not
    idempotent whose outcome is unknown (its call may or may not have taken effect, so it is
    never repeated); every step before it succeeded, none after it ran. Tools that are safe to
    repeat always end succeeded, however often their worker died. Returns the count of runs
    by outcome and the runs that broke the rule."""
    by_goal = {run.goal: run for run in runs}
    steps_of: dict[Any, list[Step]] = defaultdict(list)
    for step in sorted(steps, key=lambda s: s.index):
        steps_of[step.run_id].append(step)
    outcomes: Counter[str] = Counter()
    bad = []
    for i, specs in enumerate(expected_plan):
        run = by_goal.get(goal_of(i))
        if run is None:
            bad.append(f"run {i} of the plan was never created")
            continue
        ran = steps_of[run.pk]
        if [s.tool for s in ran] != [spec["tool"] for spec in specs]:
            bad.append(f"run {i} has steps {[s.tool for s in ran]}, not its plan's")
            continue
        if run.status == RunStatus.SUCCEEDED and all(s.status == StepStatus.SUCCEEDED for s in ran):
            outcomes["succeeded"] += 1
            continue
        failed = [s for s in ran if s.status == StepStatus.FAILED]
        if run.status != RunStatus.FAILED or len(failed) != 1:
            bad.append(f"run {i} ended {run.status} with steps {[s.status for s in ran]}")
            continue
        step = failed[0]
        kind = (step.error or {}).get("type")
        before, after = ran[: step.index], ran[step.index + 1 :]
        if step.tool != EFFECT or kind != "outcome_unknown":
            bad.append(f"run {i} failed at step {step.index} ({step.tool}) with {kind}")
        elif any(s.status != StepStatus.SUCCEEDED for s in before) or any(
            s.attempts for s in after
        ):
            bad.append(f"run {i} failed at step {step.index} but its other steps do not fit")
        else:
            outcomes["failed: outcome unknown"] += 1
    return outcomes, bad


def check_invariants(
    *,
    faults: Counter[str],
    kill_times: dict[tuple[int, int], datetime],
    expected_plan: list[list[dict[str, Any]]],
    database_url: str,
) -> Report:
    """Check every invariant on the database once the processes are stopped, against the
    workload's ``expected_plan`` (``workload.plan_workload``) and the effects the recorder saw
    (read from ``database_url``); the figures include ``faults`` (counts by kind), the runs'
    outcomes and recovery times computed with ``kill_times``."""
    runs = list(Run.objects.all())
    steps = list(Step.objects.select_related("run"))
    report = Report()
    failures = report.failures

    stuck = [r for r in runs if r.status not in RUN_TERMINAL]
    if stuck:
        failures.append(f"{len(stuck)} runs not terminal: {[str(r.pk) for r in stuck[:5]]}")
    lost = [
        s
        for s in steps
        if s.status not in STEP_TERMINAL
        and not (s.status == StepStatus.PENDING and s.run.status == RunStatus.FAILED)
    ]
    if lost:
        failures.append(f"{len(lost)} steps lost: {[(s.pk, s.status) for s in lost[:5]]}")

    effects = recorder.effects(database_url)
    effect_failures = _effect_failures(steps, effects)
    if effect_failures:
        failures.append(f"{len(effect_failures)} effect failures: {effect_failures[:5]}")

    outcomes, plan_failures = _plan_outcomes(runs, steps, expected_plan)
    if plan_failures:
        failures.append(f"{len(plan_failures)} runs off their plan: {plan_failures[:5]}")

    # The ledger (written by the product) against the recorder (written by the tools): a call
    # the ledger holds as succeeded took effect.
    ledger = dict(ToolCall.objects.values_list("idempotency_key", "status"))
    ledger_mismatches = [
        s.pk
        for s in steps
        if s.tool in EFFECT_TOOLS
        and ledger.get(s.idempotency_key) == CallStatus.SUCCEEDED
        and not effects[s.idempotency_key]
    ]
    if ledger_mismatches:
        failures.append(
            f"{len(ledger_mismatches)} calls the ledger holds as succeeded left no effect: "
            f"{ledger_mismatches[:5]}"
        )

    audit_bad = _audit_mismatches(steps, runs)
    if audit_bad:
        failures.append(f"{len(audit_bad)} audit mismatches: {audit_bad[:3]}")
    verified = audit_verify()
    broken = [report for report in verified if not report.ok]
    if broken:
        failures.append(f"{len(broken)} audit chains broken: {[b.chain for b in broken[:5]]}")

    attempts = list(StepAttempt.objects.values_list("step_id", "number", "status", "error"))
    numbers = {(step_id, number) for step_id, number, _, _ in attempts}
    lost_attempts = [(s, n) for s, n, status, _ in attempts if status == AttemptStatus.LOST]
    retried = sum(1 for step_id, number in lost_attempts if (step_id, number + 1) in numbers)
    detected, recovered = _recovery_seconds(kill_times)
    error_types = Counter(
        (r.error or {}).get("type", "?") for r in runs if r.status == RunStatus.FAILED
    )
    report.figures = {
        "runs": len(runs),
        "steps": len(steps),
        "step attempts": len(attempts),
        "faults: worker pool processes killed": faults["kill_child"],
        "faults: worker main processes killed": faults["kill_parent"],
        "faults: redis restarts": faults["redis_restart"],
        "faults: pg_terminate_backend rounds": faults["pg_terminate"],
        "  connections terminated": faults["pg_connections_terminated"],
        "faults: hang-tool timeouts": sum(
            1 for *_, error in attempts if (error or {}).get("type") == "timeout"
        ),
        "unexpected exits restarted (worker, beat)": (
            f"{faults['unexpected_worker']}, {faults['unexpected_beat']}"
        ),
        "attempts lost (worker gone)": len(lost_attempts),
        "  of which retried": retried,
        "loss detected after, p50 / p99 (s)": p50_p99(detected),
        "next attempt (or step end) after, p50 / p99 (s)": p50_p99(recovered),
        "runs by status": dict(Counter(r.status for r in runs)),
        "runs by outcome against the plan": dict(outcomes),
        "failed runs by error type": dict(error_types),
        "steps by status": dict(Counter(s.status for s in steps)),
        "lost steps": len(lost),
        "stuck runs": len(stuck),
        "effect failures (recorder)": len(effect_failures),
        "runs off their plan": len(plan_failures),
        "ledger mismatches": len(ledger_mismatches),
        "audit mismatches": len(audit_bad),
        "audit chains verified / broken": f"{len(verified) - len(broken)} / {len(broken)}",
    }
    return report
