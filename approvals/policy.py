"""The approval policy: the rule an approval request is decided by (``ApprovalPolicy``: who
may decide, how many, for how long, what expiry means), as one value."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
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

    ``edited_by``: the id of the reviewer whose edit of the arguments made the request start
    over under this policy (``approvals.reclassify``; None: nobody's). Four eyes: like the
    person who asked for the call, they proposed it, so they may not decide it (unless
    ``requester_may_decide``).

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
    edited_by: int | None = None

    def schedule(self, now: datetime) -> dict[str, datetime | None]:
        """When a request opened at ``now`` under this policy expires, reminds its approvers
        and escalates: ``{"expires_at": ..., "remind_at": ..., "escalate_at": ...}`` (None:
        never), the ``ApprovalRequest`` fields."""

        def after(seconds: int) -> datetime | None:
            return now + timedelta(seconds=seconds) if seconds else None

        return {
            "expires_at": now + timedelta(seconds=self.ttl_seconds),
            "remind_at": after(self.remind_after_seconds),
            "escalate_at": after(self.escalate_after_seconds),
        }

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
        if self.edited_by == user.pk:
            return "a reviewer may not decide on arguments they edited into a stricter policy"
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
        """Whether ``user`` requested ``run``, asked for ``step`` or edited its arguments into
        this policy (``edited_by``), and the policy keeps requesters from deciding."""
        return not self.requester_may_decide and user.pk in (
            run.requested_by_id,
            step.requested_by_id,
            self.edited_by,
        )

    def deciders(self) -> frozenset[str] | None:
        """The groups whose members may decide at some point (the approvers, and the
        escalation group once it escalates); None when any reviewer may."""
        return frozenset(self.deciding_groups(escalated=True)) if self.approvers else None

    def stricter_than(self, other: ApprovalPolicy) -> list[str]:
        """In which ways this policy asks more than ``other`` (empty: in none), in words: more
        approvals; a group rule that refuses someone ``other`` lets decide (``deciders``
        narrower or different); another permission; requesters kept out where ``other``
        lets them decide; expiry failing the run where ``other``'s refuses the call. Time to
        live, reminders and reasons are not compared."""
        found = []
        if self.approvals > other.approvals:
            found.append(f"{self.approvals} approvals instead of {other.approvals}")
        mine, theirs = self.deciders(), other.deciders()
        if mine is not None and (theirs is None or not theirs <= mine):
            before = " or ".join(sorted(theirs)) if theirs else "any reviewer"
            found.append(f"only members of {' or '.join(sorted(mine))} (was {before})")
        if self.permission != other.permission:
            found.append(f"the permission {self.permission} (was {other.permission})")
        if other.requester_may_decide and not self.requester_may_decide:
            found.append("requesters may not decide")
        if self.on_expiry == EXPIRY_FAILS and other.on_expiry != EXPIRY_FAILS:
            found.append("expiry fails the run")
        return found

    def tightened_by(self, fresh: ApprovalPolicy, *, edited_by: int | None) -> ApprovalPolicy:
        """The policy a request decided by this one starts over under when its arguments were
        edited (by the user ``edited_by``) into a call the step policy gives ``fresh``, which
        is stricter in some way (``stricter_than``): ``fresh``, but never asking less than
        this one, so an edit never makes a request easier to approve. The larger number of
        approvals; who may decide: this policy's groups (and escalation) when they are the
        narrower (every group it admits ``fresh`` admits too), else ``fresh``'s; requesters
        kept out when either keeps them out; expiry failing the run when either fails it;
        ``fresh``'s permission, time to live, reminder, rule and reason."""
        mine, theirs = self.deciders(), fresh.deciders()
        who = self if mine is not None and (theirs is None or mine <= theirs) else fresh
        return replace(
            fresh,
            approvals=max(self.approvals, fresh.approvals),
            approvers=who.approvers,
            escalation_group=who.escalation_group,
            escalate_after_seconds=who.escalate_after_seconds,
            requester_may_decide=self.requester_may_decide and fresh.requester_may_decide,
            on_expiry=EXPIRY_FAILS
            if EXPIRY_FAILS in (self.on_expiry, fresh.on_expiry)
            else fresh.on_expiry,
            edited_by=edited_by,
        )

    def is_met(self, approvals: int) -> bool:
        """Whether ``approvals`` approvals (from distinct people) approve the request."""
        return approvals >= self.approvals
