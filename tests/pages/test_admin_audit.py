"""Changing what governs runs in admin leaves a trace: adding, changing and deleting a risk
rule or a retention policy are events of the system audit chain, and the chain verifies."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import RiskRule
from audit.models import AuditEvent
from audit.selectors import chain_verify
from runs.models import RetentionPolicy

pytestmark = pytest.mark.django_db


def _events(verb: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(chain="system", verb=verb).order_by("id"))


def test_switching_a_risk_rule_off_in_admin_is_audited(admin_client, admin_user, seeded):
    rule = RiskRule.objects.get(pattern="send_*")
    url = reverse("admin:approvals_riskrule_change", args=[rule.pk])
    form = {
        "pattern": rule.pattern,
        "risk": "low",
        "required_approvals": "",
        "priority": rule.priority,
        "description": rule.description,
        "on_expiry": "reject",
        "applies_to_read_only": "on",
    }  # "enabled" left out: unchecked
    response = admin_client.post(url, form)
    assert response.status_code == 302
    (event,) = _events("admin.riskrule.changed")
    assert event.actor_name == admin_user.username
    assert event.payload["changed"] == {"risk": ["high", "low"], "enabled": [True, False]}

    delete = reverse("admin:approvals_riskrule_delete", args=[rule.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    (deleted,) = _events("admin.riskrule.deleted")
    assert deleted.payload["was"]["pattern"] == "send_*"
    assert chain_verify("system").ok


def test_adding_a_retention_policy_in_admin_is_audited(admin_client):
    url = reverse("admin:runs_retentionpolicy_add")
    response = admin_client.post(
        url,
        {
            "name": "delete old",
            "enabled": "on",
            "statuses": ["succeeded"],
            "agent": "",
            "ttl_days": 30,
            "action": "delete",
        },
    )
    assert response.status_code == 302, response.content[:500]
    policy = RetentionPolicy.objects.get(name="delete old")
    (event,) = _events("admin.retentionpolicy.added")
    assert event.object_id == str(policy.pk)
    assert event.payload["changed"]["ttl_days"] == [None, 30]
