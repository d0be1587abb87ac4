"""Changes of a project's own risk rules (with their approval policies): its policy on top of
the global defaults (``RiskRule.project``).

Every change is a policy change of its project (``runs.policy.owned_change_recorded``): the
rule is validated (``RiskRule.full_clean``: the condition grammar, the approval policy's
consistency) and written, the project's row is locked, its ``policy_version`` moves on and
the change, with the rule before and after and their diff, is written to the project's
audit chain, all in one transaction. The caller has checked that the actor
administers the project (``POLICY_PERMISSION``). Every process reads the rules again once
the change commits (``approvals.risk.rules_changed``, on the model's save and delete
signals).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from agentops.actors import Actor
from agentops.errors import InvalidInput
from approvals.models import RiskRule
from audit.services import audited_atomic
from runs.policy import owned_change_recorded

# The permission, held by the project admins' role, to read and change a project's policy.
POLICY_PERMISSION = "projects.manage_policy"
# The fields of a rule a project admin sets (its approvers and webhooks are set in admin).
RULE_FIELDS = (
    "pattern",
    "condition",
    "risk",
    "required_approvals",
    "priority",
    "enabled",
    "applies_to_read_only",
    "description",
    "ttl_seconds",
    "remind_after_seconds",
    "escalate_after_seconds",
    "on_expiry",
    "validators",
)


def rule_as_json(rule: RiskRule) -> dict[str, Any]:
    """The rule as its project's policy records it: ``id``, the ``RULE_FIELDS``, and its
    approvers' and escalation group's names (None: none)."""
    found: dict[str, Any] = {"id": rule.pk}
    found.update({name: getattr(rule, name) for name in RULE_FIELDS})
    found["approvers"] = rule.approvers.name if rule.approvers else None
    found["escalation_group"] = rule.escalation_group.name if rule.escalation_group else None
    return found


def _checked(rule: RiskRule) -> None:
    try:
        rule.full_clean()
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise InvalidInput(f"{field}: {' '.join(messages)}", field=field) from None


def risk_rule_save(*, actor: Actor, rule: RiskRule) -> RiskRule:
    """Create ``rule`` (no ``pk`` yet) or write its changes, as a change of the policy of the
    project it belongs to, or belonged to before (see the module docstring; a rule moved
    between projects leaves one policy and joins the other); returns it saved.

    Raises:
        InvalidInput: the rule may not be saved (``RiskRule.full_clean``: a field's type or
            choice, a condition outside the grammar, an approval policy that cannot work, the
            same pattern and condition as another rule of the project).
    """
    _checked(rule)
    with audited_atomic():
        stored = RiskRule.objects.select_for_update().filter(pk=rule.pk).first()
        rule.save()
        owned_change_recorded(
            actor=actor,
            kind="risk_rule",
            object_id=rule.pk,
            before=stored,
            after=rule,
            as_json=rule_as_json,
        )
    return rule


def risk_rule_delete(*, actor: Actor, rule: RiskRule) -> None:
    """Delete ``rule`` as a change of its project's policy (a global rule is no project's:
    only its deletion happens)."""
    with audited_atomic():
        rule_id = rule.pk
        owned_change_recorded(
            actor=actor,
            kind="risk_rule",
            object_id=rule_id,
            before=rule,
            after=None,
            as_json=rule_as_json,
        )
        rule.delete()


def risk_rule_update(*, actor: Actor, rule: RiskRule, fields: dict[str, Any]) -> RiskRule:
    """Set ``fields`` (names from ``RULE_FIELDS``) on a project's ``rule`` and save it
    (``risk_rule_save``).

    Raises:
        InvalidInput: a field outside ``RULE_FIELDS``, or as ``risk_rule_save``.
    """
    unknown = set(fields) - set(RULE_FIELDS)
    if unknown:
        raise InvalidInput(f"unknown fields: {', '.join(sorted(unknown))}", field="rule")
    for name, value in fields.items():
        setattr(rule, name, value)
    return risk_rule_save(actor=actor, rule=rule)
