"""JSON shape of a project's policy for the REST API: its own risk rules, the global default
rules it extends, its tool grant and policy version; and the input of rule changes."""

from __future__ import annotations

from rest_framework import serializers

from agentops.api import StrictSerializer
from approvals.models import ExpiryOutcome
from runs.models import Risk


class RiskRuleInputSerializer(StrictSerializer):
    """A project's rule as a project admin writes it (``approvals.rules.RULE_FIELDS``):
    ``pattern`` (fnmatch), ``condition`` (the rule-condition language), ``risk`` (``deny``
    refuses the calls it matches), approvals and timings (seconds), and ``validators`` of the
    results of the calls it matches (``runs.tools.validators.validators_from_json``: checked
    when the rule is saved, a malformed one is a 400)."""

    pattern = serializers.CharField(max_length=128)
    condition = serializers.CharField(max_length=300, required=False, allow_blank=True)
    risk = serializers.ChoiceField(choices=Risk.choices)
    required_approvals = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=32767
    )
    priority = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    enabled = serializers.BooleanField(required=False)
    applies_to_read_only = serializers.BooleanField(required=False)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    ttl_seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**31 - 1
    )
    remind_after_seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**31 - 1
    )
    escalate_after_seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**31 - 1
    )
    on_expiry = serializers.ChoiceField(choices=ExpiryOutcome.choices, required=False)
    # A declared field (the serializer's metaclass takes it off the class), not DRF's
    # ``Field.validators`` that mypy sees.
    validators = serializers.JSONField(required=False)  # type: ignore[assignment]


class RiskRuleSerializer(RiskRuleInputSerializer):
    """A rule as the policy shows it (``approvals.rules.rule_as_json``): its ``id``, fields,
    and its approvers' and escalation group's names."""

    id = serializers.IntegerField()
    approvers = serializers.CharField(allow_null=True)
    escalation_group = serializers.CharField(allow_null=True)


class GrantInputSerializer(StrictSerializer):
    """``PUT .../policy/grant/``: the project's tool grant (``agentops.grants``; null: any
    tool)."""

    grant = serializers.JSONField(allow_null=True)


class PolicySerializer(serializers.Serializer):
    """A project's policy: its ``project`` slug, ``version`` (its changes so far), ``grant``,
    its own ``risk_rules`` (tried first) and the global ``default_risk_rules`` after them."""

    project = serializers.CharField()
    version = serializers.IntegerField()
    grant = serializers.JSONField(allow_null=True)
    risk_rules = RiskRuleSerializer(many=True)
    default_risk_rules = RiskRuleSerializer(many=True)
