"""Risk rules with conditions on the call's arguments, through the real step-creation path (a
client run's ``step_append``), and their editing in admin (bad conditions and policies are
refused with a form error, nothing saved)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from approvals.models import ApprovalRequest, RiskRule
from audit.models import AuditEvent
from runs.models import StepStatus
from tests.approvals.conftest import client_step

pytestmark = pytest.mark.django_db


@pytest.fixture
def refund_rules(seeded):
    """Refunds over $500 are critical (two approvals); other refunds are low risk."""
    over = RiskRule.objects.create(
        pattern="refund_*",
        condition="amount > 500",
        risk="critical",
        priority=10,
        description="refund over $500",
    )
    RiskRule.objects.create(pattern="refund_*", risk="low", priority=20)
    return over


def test_a_refund_over_500_is_critical_and_one_of_400_is_not(
    operator, refund_rules, django_capture_on_commit_callbacks
):
    _run, big = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 600}
    )
    assert big.risk == "critical"
    assert big.status == StepStatus.WAITING
    approval = ApprovalRequest.objects.get(step=big)
    assert approval.required_approvals == 2
    assert approval.rule.reason == (
        f"rule #{refund_rules.pk} 'refund over $500': amount > 500 (amount = 600)"
    )
    assert approval.rule.rule_id == refund_rules.pk

    _run, small = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 400}
    )
    assert small.risk == "low"
    assert small.gate == ""
    assert small.status == StepStatus.READY
    assert not ApprovalRequest.objects.filter(step=small).exists()


def test_a_condition_the_arguments_do_not_fit_skips_its_rule_and_asks_a_person(
    operator, refund_rules, django_capture_on_commit_callbacks
):
    # The amount as text: the comparison fails. The next rule (low) decides the risk, but a
    # person must look, and the reason says which rule could not be read and why.
    _run, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": "6000"}
    )
    assert step.risk == "low"
    assert step.status == StepStatus.WAITING
    approval = ApprovalRequest.objects.get(step=step)
    assert approval.required_approvals == 1
    assert approval.rule.reason == (
        "rule refund_*: low risk; "
        f"rule #{refund_rules.pk} 'refund over $500' could not be evaluated "
        "(amount > 500: TypeError: '>' not supported between instances of 'str' and 'int')"
    )
    _run, missing = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"total": 6000}
    )
    assert missing.status == StepStatus.WAITING
    assert "the arguments have no 'amount'" in missing.approval.rule.reason


def test_a_condition_that_formats_a_huge_string_is_stopped_and_asks_a_person(
    operator, refund_rules, django_capture_on_commit_callbacks
):
    # "%0999999999d" % 1 would write a gigabyte for every call this rule classifies.
    huge = RiskRule.objects.create(
        pattern="refund_*", condition='note % amount == "x"', risk="low", priority=5
    )
    _run, step = client_step(
        operator,
        django_capture_on_commit_callbacks,
        "refund_payment",
        {"amount": 600, "note": "%0999999999d"},
    )
    assert step.risk == "critical"
    assert step.status == StepStatus.WAITING
    assert ApprovalRequest.objects.get(step=step).rule.reason == (
        f"rule #{refund_rules.pk} 'refund over $500': amount > 500 (amount = 600); "
        f"rule #{huge.pk} 'refund_*' could not be evaluated (note % amount == \"x\": "
        "InvalidExpression: % formats strings, which a condition may not do (numbers only))"
    )


def test_a_condition_saved_before_the_rules_tightened_does_not_crash_the_step(
    operator, seeded, django_capture_on_commit_callbacks
):
    # Written past the form's validation (as an old row would be): the step is still created.
    rule = RiskRule.objects.create(
        pattern="refund_*", condition="amount.__class__", risk="low", priority=1
    )
    _run, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 1}
    )
    assert step.status == StepStatus.WAITING
    assert step.risk == "high"  # no rule matched: an unknown tool
    assert f"rule #{rule.pk} 'refund_*' could not be evaluated" in step.approval.rule.reason
    assert "invalid condition: keys starting with _" in step.approval.rule.reason


def _rule_form(**fields: object) -> dict[str, object]:
    form: dict[str, object] = {
        "description": "refund over $500",
        "pattern": "refund_*",
        "condition": "amount > 500",
        "risk": "critical",
        "priority": 10,
        "enabled": "on",
        "required_approvals": "",
        "ttl_seconds": "",
        "remind_after_seconds": "",
        "escalate_after_seconds": "",
        "on_expiry": "reject",
        "webhook_urls": "",
    }
    form.update(fields)
    return form


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"condition": "amount >"}, "condition", "invalid condition: not an expression"),
        ({"condition": "amount.__class__"}, "condition", "keys starting with _"),
        ({"condition": '__import__("os")'}, "condition", "only the functions"),
        ({"condition": "x" * 301}, "condition", "at most 300 characters"),
        ({"ttl_seconds": 60, "remind_after_seconds": 60}, "remind_after_seconds", "between 1"),
        ({"escalate_after_seconds": 30}, "escalation_group", "choose the group"),
        ({"ttl_seconds": 0}, "ttl_seconds", "at least 1 second"),
        ({"webhook_urls": "not a url"}, "webhook_urls", "line 1 is not a webhook URL"),
        ({"on_expiry": "explode"}, "on_expiry", "Select a valid choice"),
    ],
)
def test_admin_refuses_a_rule_that_cannot_work_with_a_form_error(
    admin_client, seeded, fields, field, message
):
    count = RiskRule.objects.count()
    response = admin_client.post(reverse("admin:approvals_riskrule_add"), _rule_form(**fields))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors[field])
    assert message in response.content.decode()
    assert RiskRule.objects.count() == count


def test_admin_saves_a_rule_with_its_condition_and_policy(admin_client, seeded):
    finance = Group.objects.create(name="finance")
    managers = Group.objects.create(name="managers")
    response = admin_client.post(
        reverse("admin:approvals_riskrule_add"),
        _rule_form(
            approvers=finance.pk,
            escalation_group=managers.pk,
            ttl_seconds=3600,
            remind_after_seconds=600,
            escalate_after_seconds=1800,
            on_expiry="fail",
            webhook_urls="json://hooks.example.com/approvals?token=s3cret",
        ),
    )
    assert response.status_code == 302
    rule = RiskRule.objects.get(condition="amount > 500")
    assert (rule.approvers, rule.escalation_group, rule.on_expiry) == (finance, managers, "fail")
    assert (rule.ttl_seconds, rule.remind_after_seconds, rule.escalate_after_seconds) == (
        3600,
        600,
        1800,
    )
    # The audit log keeps the change, but not the webhook's secret.
    event = AuditEvent.objects.get(verb="admin.riskrule.added")
    assert "s3cret" not in str(event.payload)
    assert event.payload["changed"]["condition"] == [None, "amount > 500"]
