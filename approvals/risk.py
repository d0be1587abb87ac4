"""Risk rules: how risky a tool call is, and whether it waits at the approval gate.

Default rules (seeded by migration, editable in admin) follow the core issue: read-only names
(``get_*``, ``search_*``, ``list_*``, ``find_*``, ``calculate``, ``think``) are low risk; writes
that move money or change bookings (``book_*``, ``cancel_*``, ``update_*``, ``send_*``,
``delete_*``, ``create_*``, ``modify_*``, ``transfer_*``, ``return_*``, ``exchange_*``) are high.
"""

from __future__ import annotations

from dataclasses import replace
from fnmatch import fnmatchcase

from django.conf import settings

from approvals.models import RiskRule
from approvals.policy import APPROVAL_GATE, ApprovalPolicy
from runs.gates import Classification, StepRequest
from runs.models import Risk
from runs.tools import get_tool

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
    return list(RiskRule.objects.filter(enabled=True).order_by("priority", "pattern"))


def classify(
    tool_name: str, *, rules: list[RiskRule], edited: bool = False, declared_risk: str = ""
) -> tuple[str, int, str]:
    """Classify a call of ``tool_name``: ``(risk, approvals needed, reason)`` from the first of
    ``rules`` (see ``load_rules``) whose pattern matches, else the risk the tool's own server
    declares (``declared_risk``, a ``Risk`` value: an MCP server's annotations), else the
    registered tool's declared risk, else ``UNKNOWN_TOOL_RISK``. Edited arguments (``edited``)
    always need an approval: nobody but the person who edited them has seen them."""
    for rule in rules:
        if fnmatchcase(tool_name, rule.pattern):
            needed = rule.required_approvals
            if needed is None:
                needed = APPROVALS_NEEDED[Risk(rule.risk)]
            risk, reason = rule.risk, f"rule {rule.pattern}: {rule.risk} risk"
            break
    else:
        tool = get_tool(tool_name)
        if declared_risk:
            risk, reason = Risk(declared_risk), f"its server declares {declared_risk} risk"
        elif tool:
            risk, reason = Risk(tool.risk), f"{tool_name} declares {tool.risk} risk"
        else:
            risk, reason = UNKNOWN_TOOL_RISK, f"unknown tool: {UNKNOWN_TOOL_RISK} risk"
        needed = APPROVALS_NEEDED[risk]
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
            risk, needed, reason = classify(
                request.tool,
                rules=rules,
                edited=request.edited,
                declared_risk=request.declared_risk,
            )
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

    def escalate(
        self, request: StepRequest, current: Classification, reason: str
    ) -> Classification:
        """At least one approval, for ``reason`` (added to the step's own reason when its risk
        already needed approvals)."""
        policy = ApprovalPolicy(
            approvals=1, ttl_seconds=settings.AGENTOPS_APPROVAL_TTL_SECONDS, reason=reason
        )
        if current.gate == APPROVAL_GATE:
            own = ApprovalPolicy.from_json(current.params)
            policy = replace(own, reason=f"{reason}; {own.reason}" if own.reason else reason)
        return Classification(current.risk, APPROVAL_GATE, policy.as_json())
