"""Risk policy: how risky a tool call is and how many approvals it needs.

Default rules (seeded by migration, editable in admin) follow the core issue: read-only names
(``get_*``, ``search_*``, ``list_*``, ``find_*``, ``calculate``, ``think``) are low risk; writes
that move money or change bookings (``book_*``, ``cancel_*``, ``update_*``, ``send_*``,
``delete_*``, ``create_*``, ``modify_*``, ``transfer_*``, ``return_*``, ``exchange_*``) are high.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from runs.models import Risk
from runs.tools import get_tool

if TYPE_CHECKING:
    from approvals.models import RiskRule

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


@dataclass(frozen=True)
class Classification:
    """``risk`` of a tool call and ``required_approvals`` (0: runs without a reviewer)."""

    risk: str
    required_approvals: int


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


def classify(tool_name: str, *, rules: list[RiskRule]) -> Classification:
    """Classify a call of ``tool_name``: the first of ``rules`` (see ``load_rules``) whose
    pattern matches, else the registered tool's declared risk, else ``UNKNOWN_TOOL_RISK``."""
    for rule in rules:
        if fnmatchcase(tool_name, rule.pattern):
            needed = rule.required_approvals
            if needed is None:
                needed = APPROVALS_NEEDED[Risk(rule.risk)]
            return Classification(rule.risk, needed)
    tool = get_tool(tool_name)
    risk = Risk(tool.risk) if tool else UNKNOWN_TOOL_RISK
    return Classification(risk, APPROVALS_NEEDED[risk])
