"""Risk rules: how risky a tool call is, and whether and under which policy it waits at the
approval gate.

Default rules (seeded by migration, editable in admin) follow the core issue: read-only names
(``get_*``, ``search_*``, ``list_*``, ``find_*``, ``calculate``, ``think``) are low risk; writes
that move money or change bookings (``book_*``, ``cancel_*``, ``update_*``, ``send_*``,
``delete_*``, ``create_*``, ``modify_*``, ``transfer_*``, ``return_*``, ``exchange_*``) are high,
even for a tool whose server declares it read-only: a server cannot talk its writes down to
low risk. An admin who trusts a server's read-only hints unticks a rule's
``applies_to_read_only`` (issue 30, item 7: read-only tools are low risk unless a rule says
otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any

from django.conf import settings

from agentops.conditions import Evaluation, evaluate
from agentops.versions import SharedVersion
from approvals.models import RiskRule
from approvals.policy import APPROVAL_GATE, ApprovalPolicy
from runs.gates import Classification, StepRequest
from runs.models import Risk
from runs.tools import Validator, get_tool

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
APPROVALS_NEEDED = {Risk.LOW: 0, Risk.MEDIUM: 0, Risk.HIGH: 1, Risk.CRITICAL: 2, Risk.DENY: 0}


def default_rules() -> list[dict[str, object]]:
    """The seeded rules as field dicts (used by the data migration and test fixtures)."""
    rules: list[dict[str, object]] = []
    for i, pattern in enumerate(LOW_PATTERNS):
        rules.append({"pattern": pattern, "risk": Risk.LOW, "priority": 100 + i})
    for i, pattern in enumerate(HIGH_PATTERNS):
        rules.append({"pattern": pattern, "risk": Risk.HIGH, "priority": 200 + i})
    return rules


# The version of the risk rules in the shared cache (Redis): a token, replaced whenever a
# rule or group changes (``rules_changed``).
_RULES_VERSION = "agentops:risk-rules:version"
_rules_version = SharedVersion(_RULES_VERSION)


@dataclass
class _HeldRules:
    version: str = ""
    rules: list[RiskRule] = field(default_factory=list)


_held = _HeldRules()


def _query_rules() -> list[RiskRule]:
    return list(
        RiskRule.objects.filter(enabled=True)
        .select_related("approvers", "escalation_group")
        .order_by("priority", "pattern", "pk")
    )


def rules_for(rules: list[RiskRule], project_id: int | None) -> list[RiskRule]:
    """The ``rules`` (``load_rules``) that apply to a call of the project ``project_id``, in
    the order they are tried: the project's own first, then the global ones (None: the
    global ones only)."""
    own = [rule for rule in rules if project_id is not None and rule.project_id == project_id]
    return own + [rule for rule in rules if rule.project_id is None]


def load_rules() -> list[RiskRule]:
    """The enabled risk rules of every project and the global ones, in the order they are
    tried (with their groups; ``rules_for`` picks a project's). Don't change the
    instances.

    Each process keeps them and reads them again (one query) when their version in the shared
    cache has changed: every step is classified by them, and building them costs a few ms.
    Saving or deleting a rule or a group (admin, the ORM) replaces the version once the
    change commits (``rules_changed``, connected in ``ApprovalsConfig.ready``); a change made
    around Django (SQL, ``QuerySet.update``) must call ``rules_changed`` too. Without the
    cache (Redis down) the rules are read every time.
    """
    version = _rules_version.current()
    if version is None:
        return _query_rules()
    held = _held
    if held.version == version:
        return held.rules
    rules = _query_rules()
    _held.version, _held.rules = version, rules
    return rules


def rules_changed(**_: object) -> None:
    """Make every process read the risk rules again (a signal receiver: any keyword arguments
    are ignored): now, for this transaction's own later steps, and again once it commits, for
    the processes that read the rules before the change was committed."""
    _rules_version.replace()


@dataclass(frozen=True)
class Verdict:
    """What the risk rules make of one call: its ``risk`` (a ``Risk`` value), how many
    ``approvals`` it needs (0: none), ``reason`` (a sentence for the reviewer) and the
    ``rule`` that matched (None: the tool's declared risk decided)."""

    risk: str
    approvals: int
    reason: str
    rule: RiskRule | None = None


def _rule_reason(rule: RiskRule, found: Evaluation | None) -> str:
    if found is None and rule.description:
        return f"rule #{rule.pk} '{rule.description}': {rule.risk} risk"
    if found is None:
        return f"rule {rule.pattern}: {rule.risk} risk"
    shown = f" ({found.values})" if found.values else ""
    return f"rule #{rule.pk} '{rule.name}': {rule.condition}{shown}"


def classify(
    tool_name: str,
    *,
    rules: list[RiskRule],
    args: dict[str, Any] | None = None,
    edited: bool = False,
    declared_risk: str = "",
) -> Verdict:
    """Classify a call of ``tool_name`` with ``args`` (its JSON object).

    The first of ``rules`` (see ``load_rules``) whose pattern matches the name and whose
    condition, if it has one, holds for ``args`` decides (skipping a rule that does not
    ``applies_to_read_only`` when the tool declares itself read-only: its server declares low
    risk, MCP's ``readOnlyHint``, or the registered tool has no side effects); else the risk
    the tool's own server declares (``declared_risk``, a ``Risk`` value: an MCP server's
    annotations), else the registered tool's declared risk, else ``UNKNOWN_TOOL_RISK``.

    A condition that cannot be evaluated on ``args`` (a missing key, a wrong type, a limit)
    does not match: the next rules are tried, the failure is added to the reason, and the call
    needs at least one approval, since its arguments are not what the rule's author expected
    (a person looks rather than a rule being skipped silently). Edited arguments
    (``edited``) always need an approval: nobody but the person who edited them has seen them
    (a ``deny`` verdict stays one: the call is refused, not approved).
    """
    failures: list[str] = []
    verdict: Verdict | None = None
    tool = get_tool(tool_name)
    if declared_risk:
        read_only = declared_risk == Risk.LOW
    else:
        read_only = tool is not None and not tool.side_effects
    for rule in rules:
        if not fnmatchcase(tool_name, rule.pattern):
            continue
        if read_only and not rule.applies_to_read_only:
            continue
        found = None
        if rule.condition:
            found = evaluate(rule.condition, args or {})
            if found.error:
                failures.append(
                    f"rule #{rule.pk} '{rule.name}' could not be evaluated "
                    f"({rule.condition}: {found.error})"
                )
                continue
            if not found.matched:
                continue
        needed = rule.required_approvals
        if needed is None:
            needed = APPROVALS_NEEDED[Risk(rule.risk)]
        verdict = Verdict(rule.risk, needed, _rule_reason(rule, found), rule)
        break
    if verdict is None:
        if declared_risk:
            risk, reason = Risk(declared_risk), f"its server declares {declared_risk} risk"
        elif tool:
            risk, reason = Risk(tool.risk), f"{tool_name} declares {tool.risk} risk"
        else:
            risk, reason = UNKNOWN_TOOL_RISK, f"unknown tool: {UNKNOWN_TOOL_RISK} risk"
        verdict = Verdict(risk, APPROVALS_NEEDED[risk], reason)
    if failures:
        verdict = replace(
            verdict,
            approvals=max(verdict.approvals, 1),
            reason="; ".join([verdict.reason, *failures]),
        )
    if edited and verdict.approvals < 1 and verdict.risk != Risk.DENY:
        verdict = replace(verdict, approvals=1, reason="arguments edited by a person")
    return verdict


def policy_for(verdict: Verdict) -> ApprovalPolicy:
    """The approval policy of a call that ``verdict`` says needs approvals: the matched rule's
    approvers, time to live, reminders, escalation and expiry outcome, else the defaults
    (any reviewer, ``AGENTOPS_APPROVAL_TTL_SECONDS``, no reminder or escalation, reject)."""
    rule = verdict.rule
    if rule is None:
        return ApprovalPolicy(
            approvals=verdict.approvals,
            ttl_seconds=settings.AGENTOPS_APPROVAL_TTL_SECONDS,
            reason=verdict.reason,
        )
    return ApprovalPolicy(
        approvals=verdict.approvals,
        ttl_seconds=rule.ttl_seconds or settings.AGENTOPS_APPROVAL_TTL_SECONDS,
        on_expiry=rule.on_expiry,
        reason=verdict.reason,
        approvers=rule.approvers.name if rule.approvers else "",
        remind_after_seconds=rule.remind_after_seconds or 0,
        escalate_after_seconds=rule.escalate_after_seconds or 0,
        escalation_group=rule.escalation_group.name if rule.escalation_group else "",
        rule_id=rule.pk,
    )


def _denial(verdict: Verdict) -> dict[str, Any]:
    """The refusal of a call a ``deny`` rule matched (``Classification.refusal``)."""
    return {
        "type": "not_granted",
        "reason": verdict.reason,
        "message": f"a deny rule refuses this call: {verdict.reason}",
        "rule": verdict.rule.pk if verdict.rule else None,
    }


class ApprovalStepPolicy:
    """The step policy (``runs.gates.StepPolicy``) of this app: risk rules (its project's,
    then the global ones) classify each new step; a ``deny`` rule refuses it before any gate,
    and a step that needs approvals waits at the approval gate under its
    ``ApprovalPolicy`` (``policy_for``): copied onto the step now, so editing a rule later
    never changes a step already created."""

    def classify(self, requests: list[StepRequest]) -> list[Classification]:
        rules = load_rules()
        found = []
        for request in requests:
            verdict = classify(
                request.tool,
                rules=rules_for(rules, request.project_id),
                args=request.args,
                edited=request.edited,
                declared_risk=request.declared_risk,
            )
            if verdict.risk == Risk.DENY:
                found.append(Classification(Risk.DENY, refusal=_denial(verdict)))
                continue
            if not verdict.approvals:
                found.append(Classification(verdict.risk))
                continue
            policy = policy_for(verdict)
            found.append(Classification(verdict.risk, APPROVAL_GATE, policy.as_json()))
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

    def validators(self, request: StepRequest) -> tuple[Validator, ...]:
        """The validators of every enabled rule of the call's project, then of every global
        one, whose pattern matches the tool and whose condition (if any) holds for its
        arguments (not just the rule that classified it: a rule that declares validators
        checks every call it matches)."""
        found: list[Validator] = []
        for rule in rules_for(load_rules(), request.project_id):
            if not rule.validators or not fnmatchcase(request.tool, rule.pattern):
                continue
            if rule.condition and not evaluate(rule.condition, request.args).matched:
                continue
            found.extend(rule.result_validators)
        return tuple(found)
