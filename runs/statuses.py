"""The statuses of runs, steps, attempts and tool calls, and what each means (one map each).

A run or step that waits at a gate has the stored status ``waiting`` and names the gate kind
in its ``gate`` field. Outside the database it shows the status its gate kind registered
(``register_waiting_status``; approval gates: ``awaiting_approval``, the value API v1 has
always had), so the API, audit events and pages keep one vocabulary per gate kind.
"""

from __future__ import annotations

from django.db import models

from agentops.statuses import StatusInfo, status_map, with_flag


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting at a gate"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    COMPENSATED = "compensated", "Compensated"
    COMPENSATION_FAILED = "compensation_failed", "Compensation failed"


class StepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    WAITING = "waiting", "Waiting at a gate"
    READY = "ready", "Ready for its client"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    WAITING_RETRY = "waiting_retry", "Waiting to retry"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    REJECTED = "rejected", "Rejected"
    REFUSED = "refused", "Refused (not granted)"
    SKIPPED = "skipped", "Skipped"
    CANCELLED = "cancelled", "Cancelled"


class AttemptStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    LOST = "lost", "Lost (worker gone)"


class CallStatus(models.TextChoices):
    STARTED = "started", "Started (outcome unknown)"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    INVALID = "invalid", "Succeeded, its result failed validation"


RUN_STATUSES = status_map(
    [
        StatusInfo("queued", "Queued", "neutral", open=True, cancellable=True),
        StatusInfo("running", "Running", "active", open=True, cancellable=True),
        StatusInfo("waiting", "Waiting at a gate", "attention", open=True, cancellable=True),
        StatusInfo("succeeded", "Succeeded", "success", terminal=True),
        StatusInfo("failed", "Failed", "danger", terminal=True),
        StatusInfo("cancelled", "Cancelled", "muted", terminal=True),
        StatusInfo("compensated", "Compensated", "muted", terminal=True),
        StatusInfo("compensation_failed", "Compensation failed", "danger", terminal=True),
    ],
    choices=RunStatus.values,
)

STEP_STATUSES = status_map(
    [
        StatusInfo("pending", "Pending", "neutral", open=True, cancellable=True),
        StatusInfo(
            "waiting", "Waiting at a gate", "attention", open=True, in_flight=True, cancellable=True
        ),
        StatusInfo(
            "ready", "Ready for its client", "active", open=True, in_flight=True, cancellable=True
        ),
        StatusInfo("queued", "Queued", "active", open=True, in_flight=True, cancellable=True),
        StatusInfo("running", "Running", "active", open=True, in_flight=True, cancellable=True),
        StatusInfo(
            "waiting_retry",
            "Waiting to retry",
            "attention",
            open=True,
            in_flight=True,
            cancellable=True,
        ),
        StatusInfo("succeeded", "Succeeded", "success", terminal=True),
        StatusInfo("failed", "Failed", "danger", terminal=True),
        StatusInfo("rejected", "Rejected", "danger", terminal=True),
        StatusInfo("refused", "Refused (not granted)", "danger", terminal=True),
        StatusInfo("skipped", "Skipped", "muted", terminal=True),
        StatusInfo("cancelled", "Cancelled", "muted", terminal=True),
    ],
    choices=StepStatus.values,
)

ATTEMPT_STATUSES = status_map(
    [
        StatusInfo("running", "Running", "active", open=True),
        StatusInfo("succeeded", "Succeeded", "success", terminal=True),
        StatusInfo("failed", "Failed", "danger", terminal=True),
        StatusInfo("lost", "Lost (worker gone)", "danger", terminal=True),
    ],
    choices=AttemptStatus.values,
)

RUN_TERMINAL = with_flag(RUN_STATUSES, "terminal")
RUN_CANCELLABLE = with_flag(RUN_STATUSES, "cancellable")
STEP_TERMINAL = with_flag(STEP_STATUSES, "terminal")
STEP_OPEN = with_flag(STEP_STATUSES, "open")
# The open step statuses in a fixed order, for SQL ``IN`` lists (one statement text).
OPEN_STEP_STATUSES = sorted(STEP_OPEN)
STEP_IN_FLIGHT = with_flag(STEP_STATUSES, "in_flight")
STEP_CANCELLABLE = with_flag(STEP_STATUSES, "cancellable")

# What a run or step waiting at each gate kind shows: gate kind name → its status info.
_WAITING: dict[str, StatusInfo] = {}


def register_waiting_status(*, gate: str, value: str, label: str) -> None:
    """Show runs and steps waiting at gates of kind ``gate`` with status ``value`` and
    ``label`` (called when a gate kind registers, ``runs.gates.register``).

    Raises:
        ValueError: ``value`` is already a stored status or another gate kind's.
    """
    taken = {info.value for gate_name, info in _WAITING.items() if gate_name != gate}
    if value in taken or value in RUN_STATUSES or value in STEP_STATUSES:
        raise ValueError(f"status {value!r} is taken")
    base = STEP_STATUSES[StepStatus.WAITING]
    _WAITING[gate] = StatusInfo(
        value, label, base.tone, open=True, in_flight=True, cancellable=True
    )


def forget_waiting_status(*, gate: str) -> None:
    """Undo ``register_waiting_status`` for ``gate`` (a gate kind unregistered)."""
    _WAITING.pop(gate, None)


def run_status_info(status: str, gate: str = "") -> StatusInfo:
    """The shown status of a run with stored ``status`` waiting at a gate of kind ``gate``."""
    if status == RunStatus.WAITING and gate in _WAITING:
        return _WAITING[gate]
    return RUN_STATUSES[status]


def step_status_info(status: str, gate: str = "") -> StatusInfo:
    """The shown status of a step with stored ``status`` whose gate kind is ``gate``."""
    if status == StepStatus.WAITING and gate in _WAITING:
        return _WAITING[gate]
    return STEP_STATUSES[status]


def _shown_choices(statuses: dict[str, StatusInfo]) -> list[tuple[str, str]]:
    shown = []
    for value, info in statuses.items():
        if value == "waiting":
            shown += [(gated.value, gated.label) for gated in _WAITING.values()]
        else:
            shown.append((value, info.label))
    return shown


def run_status_choices() -> list[tuple[str, str]]:
    """The run statuses as shown (each gate kind's waiting status instead of ``waiting``), in
    lifecycle order: the choices of the API's and the runs list's ``?status=`` filter."""
    return _shown_choices(RUN_STATUSES)


def step_status_choices() -> list[tuple[str, str]]:
    """The step statuses as shown (each gate kind's waiting status instead of ``waiting``)."""
    return _shown_choices(STEP_STATUSES)


def run_status_filter(shown: str) -> dict[str, str]:
    """ORM filter keywords matching runs whose shown status is ``shown``.

    Raises:
        KeyError: ``shown`` is no run status.
    """
    for gate, info in _WAITING.items():
        if info.value == shown:
            return {"status": RunStatus.WAITING, "gate": gate}
    if shown not in RUN_STATUSES:
        raise KeyError(shown)
    return {"status": shown}
