"""Read-only tools are low risk unless a rule says otherwise: the seeded name patterns for
writes (``transfer_*``) do not classify a tool that declares itself read-only."""

from __future__ import annotations

import pytest

from approvals.models import RiskRule
from approvals.risk import classify, load_rules, rules_changed

pytestmark = pytest.mark.django_db


def test_the_seeded_write_patterns_skip_read_only_tools(seeded):
    assert not RiskRule.objects.get(pattern="transfer_*").applies_to_read_only
    assert RiskRule.objects.get(pattern="get_*").applies_to_read_only


def test_an_mcp_tool_declared_read_only_is_low_despite_a_write_like_name(seeded):
    verdict = classify("transfer_to_human_agents", rules=load_rules(), declared_risk="low")
    assert (verdict.risk, verdict.approvals) == ("low", 0)
    assert verdict.reason == "its server declares low risk"


def test_the_same_name_without_a_read_only_declaration_stays_high(seeded):
    assert classify("transfer_to_human_agents", rules=load_rules()).risk == "high"
    declared_write = classify("transfer_funds", rules=load_rules(), declared_risk="high")
    assert declared_write.rule is not None
    assert declared_write.rule.pattern == "transfer_*"


def test_a_registered_tool_without_side_effects_is_read_only(seeded):
    RiskRule.objects.create(pattern="echo", risk="high", priority=1, applies_to_read_only=False)
    rules_changed()
    assert classify("echo", rules=load_rules()).risk == "low"


def test_a_rule_that_says_otherwise_wins(seeded):
    RiskRule.objects.create(pattern="transfer_to_*", risk="critical", priority=1)
    rules_changed()
    verdict = classify("transfer_to_human_agents", rules=load_rules(), declared_risk="low")
    assert verdict.risk == "critical"
