"""Gates: the one way a step waits before it runs, and the step policy that puts steps there.

When a step is created, the step policy classifies it: its risk, and the gate kind it must
pass before it runs (if any) with that kind's parameters for it (``Step.gate``,
``Step.gate_params``). When the step's turn comes, the executor moves it and its run to
``waiting`` and asks its gate kind to ``open`` the gate (``runs.executor.gates``). From then
on the kind decides, through the executor's reactions:

- satisfied (``gate_satisfied_locked``): the step is queued and the run goes on;
- refused (``gate_refused_locked``): the step ends ``rejected`` with the refusal as its
  ``error`` (``{"type", "message", ...}`` as the kind words it), which is what the agent sees;
  plan and transcript runs, which cannot replan, fail on it;
- cancelled: cancelling the run calls the kind's ``cancel`` for a step waiting at its gate;
- expired: the sweeper calls every kind's ``expire_due``, which refuses the gates that waited
  too long.

Kinds live in the app that owns them and register at start-up (``AppConfig.ready``), so the
executor never imports them: the approvals app registers the approval gate and the step
policy that applies its risk rules. Without a registered policy, a step's risk is its tool's
declared risk (``high`` for an unknown tool) and no step waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from django.core.exceptions import ImproperlyConfigured

from runs.models import Risk
from runs.statuses import forget_waiting_status, register_waiting_status
from runs.tools import get_tool

if TYPE_CHECKING:
    from agentops.actors import Actor
    from runs.models import Run, Step
    from runs.tools.validators import Validator


@dataclass(frozen=True)
class StepRequest:
    """A step about to be created: its ``tool`` name and ``args``; ``edited`` when a person
    changed the arguments the agent chose (a fork with edited arguments); ``declared_risk``
    the risk the tool's own server declares (a ``Risk`` value; empty: none); ``project_id``
    the project of its run, whose own policy applies on top of the global one (None: the
    global policy only)."""

    tool: str
    args: dict[str, Any]
    edited: bool = False
    declared_risk: str = ""
    project_id: int | None = None


@dataclass(frozen=True)
class Classification:
    """What the step policy makes of a step: its ``risk`` (a ``Risk`` value), the ``gate``
    kind it must pass before it runs (empty: none) and that kind's ``params`` for it (JSON).
    ``refusal`` (``{"type": "not_granted", "reason", "message", ...}``) refuses the call
    before any gate: the step ends ``refused`` with it when its turn comes, and its tool is
    never called (a ``deny`` risk rule, or a call outside the run's grants).
    ``policy_version`` is the version of the project's policy it was decided under."""

    risk: str
    gate: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    refusal: dict[str, Any] | None = None
    policy_version: int | None = None


class StepPolicy(Protocol):
    """Classifies new steps (one call per batch, so rules are read once)."""

    def classify(self, requests: list[StepRequest]) -> list[Classification]:
        """One classification per request, in order."""

    def escalate(
        self, request: StepRequest, current: Classification, reason: str
    ) -> Classification | None:
        """The classification of a step that, beyond ``current``, needs a person's go-ahead
        before it runs for ``reason`` (e.g. its run crossed its budget); None when no gate
        kind can give one (the caller then refuses the step)."""

    def validators(self, request: StepRequest) -> tuple[Validator, ...]:
        """The validators the policy adds, after its tool's own, to the result of the call
        ``request`` (its ``project_id`` set) describes (``runs.tools.validators``)."""


class GateKind(Protocol):
    """One kind of gate. ``name`` is stored in ``Step.gate`` and ``Run.gate`` (at most 32
    characters); a run or step waiting at it shows the status ``waiting_status`` (label
    ``waiting_label``) instead of ``waiting``.

    Every method is called inside the transaction that changes the step, with the run and
    step rows locked (lock order: run, step, then the kind's own rows).
    """

    name: str
    waiting_status: str
    waiting_label: str

    def open(self, *, run: Run, step: Step, actor: Actor) -> None:
        """The step has just moved to waiting at this gate: open what decides it."""

    def cancel(self, *, run: Run, step: Step, actor: Actor) -> None:
        """The run is being cancelled while the step waits here: close what decides it."""

    def expire_due(self, *, actor: Actor) -> int:
        """Refuse every gate of this kind that waited past its time (each in its own
        transaction, through ``gate_refused_locked``); returns how many. Called by the
        sweeper, outside any transaction."""


class ToolRiskPolicy:
    """The step policy without any gate kind: each step's risk is its tool's declared risk
    (``high`` for a tool nobody registered: it could do anything), and no step waits."""

    def classify(self, requests: list[StepRequest]) -> list[Classification]:
        found = []
        for request in requests:
            tool = get_tool(request.tool)
            found.append(Classification(Risk(tool.risk) if tool else Risk.HIGH))
        return found

    def escalate(
        self, request: StepRequest, current: Classification, reason: str
    ) -> Classification | None:
        return None

    def validators(self, request: StepRequest) -> tuple[Validator, ...]:
        return ()


_kinds: dict[str, GateKind] = {}
_policy: list[StepPolicy] = [ToolRiskPolicy()]


def register(kind: GateKind) -> None:
    """Register a gate kind (at start-up; registering the same name again replaces it).

    Raises:
        ValueError: the name is empty or too long, or its waiting status is taken.
    """
    if not kind.name or len(kind.name) > 32:
        raise ValueError(f"gate kind name {kind.name!r} must have 1 to 32 characters")
    register_waiting_status(gate=kind.name, value=kind.waiting_status, label=kind.waiting_label)
    _kinds[kind.name] = kind


def unregister(name: str) -> None:
    """Forget the gate kind ``name`` (tests that register a kind of their own)."""
    _kinds.pop(name, None)
    forget_waiting_status(gate=name)


def kind(name: str) -> GateKind:
    """The registered gate kind ``name``.

    Raises:
        ImproperlyConfigured: no such kind is registered (its app is not installed).
    """
    try:
        return _kinds[name]
    except KeyError:
        raise ImproperlyConfigured(f"no gate kind {name!r} is registered") from None


def kinds() -> list[GateKind]:
    """Every registered gate kind, in registration order."""
    return list(_kinds.values())


def set_step_policy(policy: StepPolicy) -> None:
    """Make ``policy`` classify every new step (at start-up)."""
    _policy[:] = [policy]


def step_policy() -> StepPolicy:
    """The step policy in force (``ToolRiskPolicy`` unless an app set another)."""
    return _policy[0]
