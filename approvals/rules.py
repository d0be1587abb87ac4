"""Changes of a project's own risk rules (with their approval policies): its policy on top of
the global defaults (``RiskRule.project``).

Every change is a policy change of its project (``runs.policy.policy_change_locked``): the
project's row is locked, the rule is validated (``RiskRule.full_clean``: the condition
grammar, the approval policy's consistency) and written, the project's ``policy_version``
moves on and the change, with the rule before and after and their diff, is written to the
project's audit chain, all in one transaction. The caller has checked that the actor
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
from runs.policy import lock_project, policy_change_locked

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
    """Create ``rule`` (no ``pk`` yet) or write its changes, as a change of its project's
    policy (see the module docstring); returns it saved.

    Raises:
        InvalidInput: the rule may not be saved (``RiskRule.full_clean``: a field's type or
            choice, a condition outside the grammar, an approval policy that cannot work, the
            same pattern and condition as another rule of the project); or it has no project
            (global rules are changed in admin by superusers).
    """
    if rule.project_id is None:
        raise InvalidInput("a project's rule needs its project", field="project")
    _checked(rule)
    with audited_atomic():
        project = lock_project(rule.project_id)
        stored = RiskRule.objects.filter(pk=rule.pk, project_id=project.pk).first()
        before = rule_as_json(stored) if stored is not None else None
        rule.save()
        policy_change_locked(
            project=project,
            actor=actor,
            kind="risk_rule",
            object_id=rule.pk,
            before=before,
            after=rule_as_json(rule),
        )
    return rule


def risk_rule_delete(*, actor: Actor, rule: RiskRule) -> None:
    """Delete ``rule``, one of a project's own rules, as a change of its project's policy.

    Raises:
        InvalidInput: a global rule (changed in admin by superusers).
    """
    if rule.project_id is None:
        raise InvalidInput("a global rule is not a project's to delete", field="project")
    with audited_atomic():
        project = lock_project(rule.project_id)
        before = rule_as_json(rule)
        rule_id = rule.pk
        rule.delete()
        policy_change_locked(
            project=project,
            actor=actor,
            kind="risk_rule",
            object_id=rule_id,
            before=before,
            after=None,
        )


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
