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
# What expiry does: refuse the gate like a rejection, with an ``approval_expired`` error (an
# agent that replans goes on with it), or fail the run whatever its agent.
EXPIRY_REJECTS = "reject"
EXPIRY_FAILS = "fail"
EXPIRY_OUTCOMES = (EXPIRY_REJECTS, EXPIRY_FAILS)


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
    ``approval_expired``, which an agent that replans takes as the call's outcome;
    ``EXPIRY_FAILS``: the step is refused and the run fails, whatever its agent). ``reason``:
    why the call waits, for the reviewer (the matched rule and why it matched, the tool's
    declared risk, or edited arguments).

    ``approvers``: the name of a Django group; when set, only its members (who must still be
    reviewers of the run's project) may decide, empty: any reviewer of the project.
    ``remind_after_seconds``: seconds after opening when the approvers are reminded (0:
    never). ``escalate_after_seconds`` and ``escalation_group``: seconds after opening when
    the request escalates to the members of that group (also reviewers of the project), who
    may then decide too and are notified (0 / empty: never). ``rule_id``: the risk rule that
    classified the call (None: none did), whose webhooks are notified.

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
    approvers: str = ""
    remind_after_seconds: int = 0
    escalate_after_seconds: int = 0
    escalation_group: str = ""
    rule_id: int | None = None

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

    def refusal(self, *, user: Any, run: Run, step: Step, escalated: bool = False) -> str:
        """Why ``user`` may not decide the request of ``step`` of ``run`` under this policy
        ("" if they may); ``escalated``: whether the request has escalated.

        Only reviewers of the run's project decide; when the policy names ``approvers``, only
        those of them who are members of that group, or, once ``escalated``, of the
        ``escalation_group`` (``group_refusal``). Four eyes: whoever requested the run, or
        asked for the step (with their session or any of their tokens), may not decide it.
        Superusers follow the same rules (they hold every permission, but groups and
        requesting still apply)."""
        if user is None or not user.has_perm(self.permission, run):
            return "only reviewers of the run's project may decide its approval requests"
        if self.approvers:
            groups = set(user.groups.values_list("name", flat=True))
            refusal = self.group_refusal(groups=groups, escalated=escalated)
            if refusal:
                return refusal
        if self.requester_may_decide:
            return ""
        if run.requested_by_id == user.pk:
            return "a reviewer may not decide on a run they requested"
        if step.requested_by_id == user.pk:
            return "a reviewer may not decide on a step they asked for"
        return ""

    def deciding_groups(self, *, escalated: bool) -> list[str]:
        """The groups whose members may decide now (empty: no group restriction)."""
        if not self.approvers:
            return []
        groups = [self.approvers]
        if escalated and self.escalation_group:
            groups.append(self.escalation_group)
        return groups

    def group_refusal(self, *, groups: set[str], escalated: bool) -> str:
        """Why a reviewer in the Django groups named ``groups`` may not decide now ("" if the
        policy names no approvers or they are in a deciding group)."""
        deciding = self.deciding_groups(escalated=escalated)
        if not deciding or groups.intersection(deciding):
            return ""
        names = " or ".join(f"'{name}'" for name in deciding)
        if self.escalation_group and not escalated:
            return (
                f"only members of {names} may decide this request until it escalates to "
                f"'{self.escalation_group}'"
            )
        return f"only members of {names} may decide this request"

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
