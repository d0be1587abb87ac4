"""What must hold after the faults: the invariants of the harness, checked on the database once
every process has stopped, and the figures it reports."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection

from audit.models import AuditEvent
from audit.selectors import chain_verify, chains
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
from testsupport.faults.tools import EFFECT_TOOLS, EFFECTS_TABLE
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


def check_invariants(
    *, faults: Counter[str], kill_times: dict[tuple[int, int], datetime]
) -> Report:
    """Check every invariant on the database once the processes are stopped; the figures
    include ``faults`` (counts by kind) and recovery times computed with ``kill_times``."""
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

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, count(*) FROM {EFFECTS_TABLE} GROUP BY key")  # noqa: S608
        effects = dict(cursor.fetchall())
    duplicates = {key: n for key, n in effects.items() if n > 1}
    if duplicates:
        failures.append(f"{len(duplicates)} keys with duplicate effects: {list(duplicates)[:5]}")
    effect_mismatches = []
    for step in steps:
        n = effects.get(step.idempotency_key, 0)
        if step.tool in EFFECT_TOOLS and step.status == StepStatus.SUCCEEDED and n != 1:
            effect_mismatches.append(f"succeeded step {step.pk} has {n} effects")
        elif step.attempts == 0 and n:
            effect_mismatches.append(f"step {step.pk} never attempted has {n} effects")
    if effect_mismatches:
        failures.append(f"{len(effect_mismatches)} effect mismatches: {effect_mismatches[:5]}")

    ledger = dict(ToolCall.objects.values_list("idempotency_key", "status"))
    ledger_mismatches = [
        s.pk
        for s in steps
        if s.status == StepStatus.SUCCEEDED
        and ledger.get(s.idempotency_key) != CallStatus.SUCCEEDED
    ]
    if ledger_mismatches:
        failures.append(
            f"{len(ledger_mismatches)} succeeded steps whose ledger row is not succeeded: "
            f"{ledger_mismatches[:5]}"
        )

    audit_bad = _audit_mismatches(steps, runs)
    if audit_bad:
        failures.append(f"{len(audit_bad)} audit mismatches: {audit_bad[:3]}")
    broken = [r for r in (chain_verify(c) for c in chains()) if not r.ok]
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
        "failed runs by error type": dict(error_types),
        "steps by status": dict(Counter(s.status for s in steps)),
        "lost steps": len(lost),
        "stuck runs": len(stuck),
        "duplicate effects": len(duplicates),
        "effect mismatches": len(effect_mismatches),
        "ledger mismatches": len(ledger_mismatches),
        "audit mismatches": len(audit_bad),
        "audit chains verified / broken": f"{len(chains()) - len(broken)} / {len(broken)}",
    }
    return report
