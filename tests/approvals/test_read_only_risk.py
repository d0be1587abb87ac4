"""Read-only tools are low risk unless a rule says otherwise; the seeded name patterns for
writes (``transfer_*``) still classify a tool whose server declares it read-only (a server
cannot talk its writes down), until an admin who trusts those hints unticks the rule's
``applies_to_read_only``."""

from __future__ import annotations

import pytest

from approvals.models import RiskRule
from approvals.risk import classify, load_rules, rules_changed

pytestmark = pytest.mark.django_db


def test_the_seeded_rules_apply_to_read_only_tools(seeded):
    assert RiskRule.objects.get(pattern="transfer_*").applies_to_read_only
    assert RiskRule.objects.get(pattern="get_*").applies_to_read_only


def test_a_read_only_declaration_does_not_lower_a_write_like_name(seeded):
    verdict = classify("transfer_to_human_agents", rules=load_rules(), declared_risk="low")
    assert (verdict.risk, verdict.approvals) == ("high", 1)
    assert verdict.rule is not None
    assert verdict.rule.pattern == "transfer_*"


def test_a_rule_unticked_for_read_only_tools_lets_their_declaration_decide(seeded):
    RiskRule.objects.filter(pattern="transfer_*").update(applies_to_read_only=False)
    rules_changed()
    verdict = classify("transfer_to_human_agents", rules=load_rules(), declared_risk="low")
    assert (verdict.risk, verdict.approvals) == ("low", 0)
    assert verdict.reason == "its server declares low risk"
    # A tool declaring a write is still caught by the rule.
    declared_write = classify("transfer_funds", rules=load_rules(), declared_risk="high")
    assert declared_write.rule is not None
    assert declared_write.rule.pattern == "transfer_*"


def test_a_registered_tool_without_side_effects_is_read_only(seeded):
    RiskRule.objects.create(pattern="echo", risk="high", priority=1, applies_to_read_only=False)
    rules_changed()
    assert classify("echo", rules=load_rules()).risk == "low"


def test_a_read_only_tool_with_no_matching_rule_is_low(seeded):
    verdict = classify("lookup_weather", rules=load_rules(), declared_risk="low")
    assert (verdict.risk, verdict.approvals) == ("low", 0)
