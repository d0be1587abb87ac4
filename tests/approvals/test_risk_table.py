"""The risk policy against a table written out here: each tool name, the risk it gets and how
many approvals its step waits for, under the seeded default rules (not the rules' own pattern
lists, which a wrong pattern would fool)."""

from __future__ import annotations

import pytest

from approvals.models import RiskRule
from approvals.risk import ApprovalStepPolicy, rules_changed
from runs.gates import StepRequest

pytestmark = pytest.mark.django_db

# tool name → (risk, approvals): the τ-bench airline tools (../shared/data/tau-bench-airline/
# tools.json), the built-in tools, and names no rule or tool knows.
TABLE = {
    "get_user_details": ("low", 0),
    "get_reservation_details": ("low", 0),
    "search_direct_flight": ("low", 0),
    "search_onestop_flight": ("low", 0),
    "list_all_airports": ("low", 0),
    "calculate": ("low", 0),
    "think": ("low", 0),
    "book_reservation": ("high", 1),
    "cancel_reservation": ("high", 1),
    "update_reservation_flights": ("high", 1),
    "update_reservation_baggages": ("high", 1),
    "update_reservation_passengers": ("high", 1),
    "send_certificate": ("high", 1),
    "send_email": ("high", 1),
    "transfer_to_human_agents": ("high", 1),
    "delete_account": ("high", 1),
    "create_invoice": ("high", 1),
    "modify_order": ("high", 1),
    "return_item": ("high", 1),
    "exchange_item": ("high", 1),
    "echo": ("low", 0),
    "sleep": ("low", 0),
    "frobnicate": ("high", 1),
    "wire_money_now": ("high", 1),
}


# The rules seeded by migration (approvals 0002), written out: pattern → risk.
SEEDED_RULES = {
    "get_*": "low",
    "search_*": "low",
    "list_*": "low",
    "find_*": "low",
    "calculate": "low",
    "think": "low",
    "book_*": "high",
    "cancel_*": "high",
    "update_*": "high",
    "send_*": "high",
    "delete_*": "high",
    "create_*": "high",
    "modify_*": "high",
    "transfer_*": "high",
    "return_*": "high",
    "exchange_*": "high",
}
# Why each airline write waits: the rule that matched it.
WRITE_REASONS = {
    "book_reservation": "rule book_*: high risk",
    "cancel_reservation": "rule cancel_*: high risk",
    "update_reservation_flights": "rule update_*: high risk",
    "send_certificate": "rule send_*: high risk",
    "transfer_to_human_agents": "rule transfer_*: high risk",
    "frobnicate": "unknown tool: high risk",
}


def test_the_seeded_rules_are_the_written_ones(seeded):
    assert dict(RiskRule.objects.values_list("pattern", "risk")) == SEEDED_RULES


@pytest.mark.parametrize(("tool", "reason"), list(WRITE_REASONS.items()))
def test_each_write_says_which_rule_sent_it_to_a_reviewer(seeded, tool, reason):
    (found,) = ApprovalStepPolicy().classify([StepRequest(tool, {})])
    assert found.params["reason"] == reason


def _classify(*tools: str, edited: bool = False) -> list[tuple[str, int]]:
    found = ApprovalStepPolicy().classify([StepRequest(t, {}, edited=edited) for t in tools])
    return [(c.risk, int(c.params.get("approvals", 0)) if c.gate else 0) for c in found]


@pytest.mark.parametrize(("tool", "expected"), list(TABLE.items()))
def test_each_tool_gets_its_risk_and_approvals(seeded, tool, expected):
    assert _classify(tool) == [expected]


def test_a_rule_with_its_own_count_and_priority_wins(seeded):
    RiskRule.objects.filter(pattern="send_*").update(risk="critical", required_approvals=2)
    rules_changed()  # an update around the ORM's signals
    RiskRule.objects.create(pattern="get_user_*", risk="medium", required_approvals=1, priority=1)
    assert _classify("send_email", "get_user_details", "get_reservation_details") == [
        ("critical", 2),
        ("medium", 1),
        ("low", 0),
    ]


def test_a_disabled_rule_no_longer_applies(seeded):
    RiskRule.objects.filter(pattern="cancel_*").update(enabled=False)
    rules_changed()  # an update around the ORM's signals
    # No rule: the tool is not registered either, so it could do anything.
    assert _classify("cancel_reservation") == [("high", 1)]
    RiskRule.objects.filter(pattern="get_*").update(enabled=False)
    rules_changed()  # an update around the ORM's signals
    assert _classify("get_user_details") == [("high", 1)]


def test_edited_arguments_always_wait_for_one_reviewer(seeded):
    assert _classify("calculate", "book_reservation", edited=True) == [("low", 1), ("high", 1)]


def _declared(tool: str, declared: str) -> tuple[str, int, str]:
    (found,) = ApprovalStepPolicy().classify([StepRequest(tool, {}, declared_risk=declared)])
    approvals = int(found.params.get("approvals", 0)) if found.gate else 0
    return found.risk, approvals, found.params.get("reason", "")


def test_a_risk_its_server_declares_applies_only_where_no_rule_matches(seeded):
    # No rule matches "lookup_weather": what its (MCP) server declares decides.
    assert _declared("lookup_weather", "low") == ("low", 0, "")
    assert _declared("wipe_disk", "high") == ("high", 1, "its server declares high risk")
    # A rule wins over any declaration: a server cannot talk its writes down to low risk.
    assert _declared("cancel_reservation", "low") == ("high", 1, "rule cancel_*: high risk")
    # Unless an admin who trusts a server's read-only hints says so on the rule.
    RiskRule.objects.filter(pattern="cancel_*").update(applies_to_read_only=False)
    rules_changed()
    assert _declared("cancel_reservation", "low") == ("low", 0, "")
    assert _declared("cancel_reservation", "high") == ("high", 1, "rule cancel_*: high risk")
    # No declaration and no rule: unknown, so high.
    assert _declared("lookup_weather", "") == ("high", 1, "unknown tool: high risk")


def test_a_rule_saved_in_another_process_reaches_this_one(seeded):
    """Rules are kept per process: a save elsewhere (here: the version replaced as the other
    process's signal does) makes this one read them again; without it, it keeps its own."""
    from django.core.cache import cache

    from approvals import risk

    before = {rule.pattern: rule.risk for rule in risk.load_rules()}
    RiskRule.objects.filter(pattern="send_*").update(risk="critical")  # no signal
    assert {rule.pattern: rule.risk for rule in risk.load_rules()} == before
    cache.set(risk._RULES_VERSION, "changed elsewhere")
    assert {r.pattern: r.risk for r in risk.load_rules()}["send_*"] == "critical"
