"""Approval policy: how risky a tool call is, whether it waits for reviewers, and the rule
of that wait (``ApprovalPolicy``: who may decide, how many, for how long, what expiry means).

Default rules (seeded by migration, editable in admin) follow the core issue: read-only names
(``get_*``, ``search_*``, ``list_*``, ``find_*``, ``calculate``, ``think``) are low risk; writes
that move money or change bookings (``book_*``, ``cancel_*``, ``update_*``, ``send_*``,
``delete_*``, ``create_*``, ``modify_*``, ``transfer_*``, ``return_*``, ``exchange_*``) are high.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from django.conf import settings

from runs.gates import Classification, StepRequest
from runs.models import Risk
from runs.tools import get_tool

if TYPE_CHECKING:
    from approvals.models import RiskRule
    from runs.models import Run

LOW_PATTERNS = ["get_*", "search_*", "list_*", "find_*", "calculate", "think"]
HIGH_PATTERNS = [
    "book_*",
    "cancel_*",
    "update_*",
    "send_*",
    "delete_*",
    "create_*",
    "modify_*",
    "transfer_*",
    "return_*",
    "exchange_*",
]
# A tool that neither a rule nor the registry classifies could do anything: treat it as high.
UNKNOWN_TOOL_RISK = Risk.HIGH
APPROVALS_NEEDED = {Risk.LOW: 0, Risk.MEDIUM: 0, Risk.HIGH: 1, Risk.CRITICAL: 2}

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
    reviewers role). ``requester_may_decide``: whether whoever requested the run may decide
    (never, by default: four eyes). ``ttl_seconds``: seconds an undecided request stays open.
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

    def refusal(self, *, user: Any, run: Run) -> str:
        """Why ``user`` may not decide requests of ``run`` under this policy ("" if they may).

        Superusers follow the same rule (they hold every permission, but requesting the run
        still excludes them)."""
        if user is None or not user.has_perm(self.permission):
            return "only reviewers may decide approval requests"
        if self.excludes_requester(user=user, run=run):
            return "a reviewer may not decide on a run they requested"
        return ""

    def excludes_requester(self, *, user: Any, run: Run) -> bool:
        """Whether ``user`` requested ``run`` and the policy keeps requesters from deciding."""
        return not self.requester_may_decide and run.requested_by_id == user.pk

    def is_met(self, approvals: int) -> bool:
        """Whether ``approvals`` approvals (from distinct people) approve the request."""
        return approvals >= self.approvals


def default_rules() -> list[dict[str, object]]:
    """The seeded rules as field dicts (used by the data migration and test fixtures)."""
    rules: list[dict[str, object]] = []
    for i, pattern in enumerate(LOW_PATTERNS):
        rules.append({"pattern": pattern, "risk": Risk.LOW, "priority": 100 + i})
    for i, pattern in enumerate(HIGH_PATTERNS):
        rules.append({"pattern": pattern, "risk": Risk.HIGH, "priority": 200 + i})
    return rules


def load_rules() -> list[RiskRule]:
    """The enabled risk rules, in the order they are tried (one query)."""
    from approvals.models import RiskRule

    return list(RiskRule.objects.filter(enabled=True).order_by("priority", "pattern"))


def classify(
    tool_name: str, *, rules: list[RiskRule], edited: bool = False
) -> tuple[str, int, str]:
    """Classify a call of ``tool_name``: ``(risk, approvals needed, reason)`` from the first of
    ``rules`` (see ``load_rules``) whose pattern matches, else the registered tool's declared
    risk, else ``UNKNOWN_TOOL_RISK``. Edited arguments (``edited``) always need an approval:
    nobody but the person who edited them has seen them."""
    for rule in rules:
        if fnmatchcase(tool_name, rule.pattern):
            needed = rule.required_approvals
            if needed is None:
                needed = APPROVALS_NEEDED[Risk(rule.risk)]
            risk, reason = rule.risk, f"rule {rule.pattern}: {rule.risk} risk"
            break
    else:
        tool = get_tool(tool_name)
        risk = Risk(tool.risk) if tool else UNKNOWN_TOOL_RISK
        needed = APPROVALS_NEEDED[risk]
        reason = f"{tool_name} declares {risk} risk" if tool else f"unknown tool: {risk} risk"
    if edited and needed < 1:
        needed, reason = 1, "arguments edited by a person"
    return risk, needed, reason


class ApprovalStepPolicy:
    """The step policy (``runs.gates.StepPolicy``) of this app: risk rules classify each new
    step, and a step that needs approvals waits at the approval gate under its
    ``ApprovalPolicy`` (time to live ``AGENTOPS_APPROVAL_TTL_SECONDS``)."""

    def classify(self, requests: list[StepRequest]) -> list[Classification]:
        rules = load_rules()
        found = []
        for request in requests:
            risk, needed, reason = classify(request.tool, rules=rules, edited=request.edited)
            if not needed:
                found.append(Classification(risk))
                continue
            policy = ApprovalPolicy(
                approvals=needed,
                ttl_seconds=settings.AGENTOPS_APPROVAL_TTL_SECONDS,
                reason=reason,
            )
            found.append(Classification(risk, APPROVAL_GATE, policy.as_json()))
        return found
