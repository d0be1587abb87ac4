"""The approval policy: the rule an approval request is decided by (``ApprovalPolicy``: who
may decide, how many, for how long, what expiry means), as one value."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runs.models import Run, Step

# The gate kind of approvals (``runs.gates``), stored in ``Step.gate`` and ``Run.gate``.
APPROVAL_GATE = "approval"
# The permission a person needs to decide approval requests (the reviewers role holds it).
DECIDE_PERMISSION = "approvals.decide_approvalrequest"
# What expiry does: refuse the gate like a rejection, with an ``approval_expired`` error.
EXPIRY_REJECTS = "reject"


@dataclass(frozen=True)
class ApprovalPolicy:
    """The rule one approval request is decided by, as one value.

    ``approvals``: how many people must approve (1 or more); one rejection rejects, and each
    person decides at most once, so M approvals come from M distinct people.
    ``permission``: what a person needs to decide (``DECIDE_PERMISSION``, held by the
    reviewers role). ``requester_may_decide``: whether whoever requested the run or asked for
    the step may decide (never, by default: four eyes). ``ttl_seconds``: seconds an undecided
    request stays open.
    ``on_expiry``: what expiry does (``EXPIRY_REJECTS``: the step is refused with
    ``approval_expired``). ``reason``: why the call waits, for the reviewer (the matched rule,
    the tool's declared risk, or edited arguments).

    Decided when the step is created (``ApprovalStepPolicy``), kept on the step
    (``Step.gate_params``) and copied onto its request when it opens
    (``ApprovalRequest.policy``): editing a rule later never changes a step already created.
    """

    approvals: int
    ttl_seconds: int
    permission: str = DECIDE_PERMISSION
    requester_may_decide: bool = False
    on_expiry: str = EXPIRY_REJECTS
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        """The policy as a JSON object (``from_json`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ApprovalPolicy:
        """The policy ``as_json`` wrote.

        Raises:
            ValueError: ``data`` is not such an object.
        """
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"not an approval policy: {data!r}") from exc

    def refusal(self, *, user: Any, run: Run, step: Step) -> str:
        """Why ``user`` may not decide the request of ``step`` of ``run`` under this policy
        ("" if they may).

        Four eyes: whoever requested the run, or asked for the step (with their session or any
        of their tokens), may not decide it. Superusers follow the same rule (they hold every
        permission, but requesting still excludes them)."""
        if user is None or not user.has_perm(self.permission, run):
            return "only reviewers of the run's project may decide its approval requests"
        if self.requester_may_decide:
            return ""
        if run.requested_by_id == user.pk:
            return "a reviewer may not decide on a run they requested"
        if step.requested_by_id == user.pk:
            return "a reviewer may not decide on a step they asked for"
        return ""

    def excludes_requester(self, *, user: Any, run: Run, step: Step) -> bool:
        """Whether ``user`` requested ``run`` or asked for ``step`` and the policy keeps
        requesters from deciding."""
        return not self.requester_may_decide and user.pk in (
            run.requested_by_id,
            step.requested_by_id,
        )

    def is_met(self, approvals: int) -> bool:
        """Whether ``approvals`` approvals (from distinct people) approve the request."""
        return approvals >= self.approvals
