"""Per-rule approval policies: copied onto the step when it is created and onto its request
when it opens (editing the rule later changes neither), and approvers limited to a group."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied

from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus, RiskRule
from approvals.services import approval_decide
from projects.roles import Role
from runs.models import StepStatus
from tests.approvals.conftest import client_step, group_of
from testsupport.factories import EMAIL_ARGS, make_user, plan_run, send_email_step
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def _decide(approval_id, user, capture, decision="approve"):
    with capture(execute=True):
        return approval_decide(
            approval_id=approval_id, actor=Actor.for_user(user), decision=decision
        )


def test_the_rules_policy_is_copied_at_creation_and_editing_the_rule_changes_no_step(
    operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    rule = RiskRule.objects.create(
        pattern="send_email",
        risk="high",
        priority=1,
        ttl_seconds=600,
        required_approvals=1,
        on_expiry="fail",
        description="mail to customers",
    )
    # Two e-mails in one plan: both steps are created (and classified) now; the second opens
    # its request only after the first is approved.
    run = plan_run(
        operator,
        [send_email_step(), send_email_step({**EMAIL_ARGS, "subject": "Second"})],
        capture=django_capture_on_commit_callbacks,
    )
    first, second = run.steps.order_by("index")
    expected = {
        "approvals": 1,
        "ttl_seconds": 600,
        "on_expiry": "fail",
        "rule_id": rule.pk,
        "reason": f"rule #{rule.pk} 'mail to customers': high risk",
    }
    for step in (first, second):
        assert {k: step.gate_params[k] for k in expected} == expected
    approval = ApprovalRequest.objects.get(step=first)
    assert approval.expires_at - approval.created_at == pytest.approx(
        timedelta(seconds=600), abs=timedelta(seconds=1)
    )

    # An admin tightens the rule: two approvals, a minute, reject on expiry.
    rule.required_approvals, rule.ttl_seconds, rule.on_expiry = 2, 60, "reject"
    rule.save()
    approval.refresh_from_db()
    assert approval.rule.approvals == 1
    assert approval.rule.ttl_seconds == 600

    # One approval still approves the first request; the second step opens its request
    # under the policy it was created with, not the edited rule.
    _decide(approval.pk, reviewer, django_capture_on_commit_callbacks)
    assert ApprovalRequest.objects.get(step=first).status == ApprovalStatus.APPROVED
    later = ApprovalRequest.objects.get(step=second)
    assert (later.rule.approvals, later.rule.ttl_seconds, later.rule.on_expiry) == (
        1,
        600,
        "fail",
    )
    assert later.expires_at - later.created_at == pytest.approx(
        timedelta(seconds=600), abs=timedelta(seconds=1)
    )
    _decide(later.pk, second_reviewer, django_capture_on_commit_callbacks)
    assert run.steps.get(index=1).status == StepStatus.SUCCEEDED

    # A step created after the edit follows the edited rule.
    run = plan_run(operator, [send_email_step()], capture=django_capture_on_commit_callbacks)
    fresh = ApprovalRequest.objects.get(run=run)
    assert (fresh.rule.approvals, fresh.rule.ttl_seconds, fresh.rule.on_expiry) == (
        2,
        60,
        "reject",
    )


def test_only_reviewers_in_the_approvers_group_decide(
    operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    finance = group_of("finance", second_reviewer)
    outsider = make_user("omar")  # in the group, but no role in the project
    finance.user_set.add(outsider)
    RiskRule.objects.create(
        pattern="refund_*", risk="high", priority=1, approvers=finance, description="refunds"
    )
    run, step = client_step(
        operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 10}
    )
    approval = ApprovalRequest.objects.get(step=step)
    assert approval.rule.approvers == "finance"
    for user, why in [
        (reviewer, "only members of 'finance' may decide this request"),
        (outsider, "only reviewers"),
    ]:
        with assert_unchanged(), pytest.raises(PermissionDenied) as refused:
            _decide(approval.pk, user, django_capture_on_commit_callbacks)
        assert why in str(refused.value)
    _decide(approval.pk, second_reviewer, django_capture_on_commit_callbacks)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.APPROVED
    assert run.steps.get().status == StepStatus.READY


def test_the_inbox_says_who_may_decide_and_disables_the_buttons(
    client, operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    finance = group_of("finance", second_reviewer)
    RiskRule.objects.create(pattern="refund_*", risk="high", priority=1, approvers=finance)
    client_step(operator, django_capture_on_commit_callbacks, "refund_payment", {"amount": 10})
    client.force_login(reviewer)
    page = client.get("/approvals/").content.decode()
    assert "You may not decide this yet: only members of &#x27;finance&#x27;" in page
    assert 'data-action="approve"' not in page
    client.force_login(second_reviewer)
    page = client.get("/approvals/").content.decode()
    assert "data-refusal" not in page
    assert 'data-action="approve"' in page


def test_a_member_of_the_approvers_group_still_may_not_decide_their_own_run(
    django_capture_on_commit_callbacks, seeded
):
    both = make_user("bea", Role.OPERATOR, Role.REVIEWER)
    finance = group_of("finance", both)
    RiskRule.objects.create(pattern="refund_*", risk="high", priority=1, approvers=finance)
    _run, step = client_step(
        both, django_capture_on_commit_callbacks, "refund_payment", {"amount": 10}
    )
    with assert_unchanged(), pytest.raises(PermissionDenied, match="run they requested"):
        _decide(step.approval.pk, both, django_capture_on_commit_callbacks)
