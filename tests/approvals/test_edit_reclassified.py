"""Arguments a reviewer edits are classified again, as a fresh call with them would be: when
they need a stricter approval, the request starts over under it and the editor's approval
does not count (nor may the editor decide it); otherwise the editor's approval counts first,
as before. Through the service, the API, the inbox and admin's bulk decisions."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus, Notification, RiskRule
from approvals.policy import ApprovalPolicy
from approvals.services import approval_decide
from audit.models import AuditEvent
from audit.selectors import chain_verify
from projects.roles import Role
from runs.control.create import run_create, step_append
from runs.models import Step, StepStatus
from tests.api.conftest import approval_url, token_client
from tests.approvals.conftest import client_step, group_of
from tests.approvals.conftest import transfer_rules as create_transfer_rules
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

SMALL, LARGE = {"amount": 5}, {"amount": 5_000_000}


@pytest.fixture
def transfer_rules(seeded: None) -> None:
    create_transfer_rules()


def _decide(approval_id: int, user: Any, capture: Any, args: Any = None) -> ApprovalRequest:
    with capture(execute=True):
        return approval_decide(
            approval_id=approval_id,
            actor=Actor.for_user(user),
            decision="approve",
            comment="checked",
            args=args,
        )


def _transfer(user: Any, capture: Any, args: dict[str, Any]) -> tuple[Step, ApprovalRequest]:
    _, step = client_step(user, capture, "transfer_funds", args)
    return step, ApprovalRequest.objects.get(step=step)


def test_an_edit_into_a_larger_amount_starts_the_approval_over_under_the_stricter_policy(
    transfer_rules, operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    third = make_user("theo", Role.REVIEWER)
    # What a fresh call with the large amount needs: the independent reference.
    _, fresh = _transfer(operator, capture, LARGE)
    assert (fresh.risk, fresh.required_approvals) == ("critical", 2)

    step, approval = _transfer(operator, capture, SMALL)
    assert (approval.risk, approval.required_approvals) == ("high", 1)
    approval = _decide(approval.pk, reviewer, capture, args=LARGE)
    approval.refresh_from_db()
    # The issue: one approval ran the transfer. Now it waits for two, and rita's is not one.
    assert approval.status == ApprovalStatus.PENDING
    assert (approval.risk, approval.required_approvals) == (fresh.risk, 2)
    assert list(approval.decisions.all()) == []
    assert approval.rule.edited_by == reviewer.pk
    step.refresh_from_db()
    assert (step.status, step.args, step.risk) == (StepStatus.WAITING, LARGE, "critical")
    assert step.gate_params["approvals"] == 2
    (event,) = AuditEvent.objects.filter(run_id=step.run_id, verb="approval.reclassified")
    assert event.actor_name == reviewer.username
    assert event.payload["from"]["risk"] == "high"
    assert event.payload["from"]["policy"]["approvals"] == 1
    assert event.payload["classified"]["policy"]["approvals"] == 2
    assert event.payload["to"]["policy"]["approvals"] == 2
    assert event.payload["restarted"] is True
    assert "critical risk (was high)" in event.payload["stricter"]
    assert chain_verify(f"run:{step.run_id}").ok

    # The editor proposed this call: four eyes keep them from deciding it.
    with assert_unchanged(), pytest.raises(PermissionDenied, match="arguments they edited"):
        _decide(approval.pk, reviewer, capture)
    _decide(approval.pk, second_reviewer, capture)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.PENDING
    _decide(approval.pk, third, capture)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.APPROVED
    step.refresh_from_db()
    assert (step.status, step.args) == (StepStatus.READY, LARGE)


def test_an_edit_that_needs_no_stricter_approval_is_approved_by_its_editor_as_before(
    transfer_rules, operator, reviewer, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    step, approval = _transfer(operator, capture, SMALL)
    _decide(approval.pk, reviewer, capture, args={"amount": 7})
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert [d.reviewer_name for d in approval.decisions.all()] == [reviewer.username]
    (event,) = AuditEvent.objects.filter(run_id=step.run_id, verb="approval.reclassified")
    assert (event.payload["restarted"], event.payload["stricter"]) == (False, [])


def test_an_edit_into_a_looser_call_keeps_the_stricter_policy_it_had(
    transfer_rules, operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    _, approval = _transfer(operator, capture, LARGE)
    _decide(approval.pk, reviewer, capture, args=SMALL)
    approval.refresh_from_db()
    # Still two approvals (the policy it had), the editor's counting first.
    assert (approval.status, approval.required_approvals) == (ApprovalStatus.PENDING, 2)
    assert [d.reviewer_name for d in approval.decisions.all()] == [reviewer.username]
    _decide(approval.pk, second_reviewer, capture)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.APPROVED


def test_an_edit_into_another_approvers_group_is_decided_by_that_group_only(
    operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    fiona = make_user("fiona", Role.REVIEWER)
    treasury = group_of("treasury", reviewer, fiona)
    RiskRule.objects.create(
        pattern="transfer_funds",
        condition="currency == 'BTC'",
        risk="high",
        priority=1,
        approvers=treasury,
        description="crypto",
    )
    _, approval = _transfer(operator, capture, {"amount": 5, "currency": "EUR"})
    assert approval.rule.approvers == ""
    _decide(approval.pk, reviewer, capture, args={"amount": 5, "currency": "BTC"})
    approval.refresh_from_db()
    assert (approval.status, approval.rule.approvers) == (ApprovalStatus.PENDING, "treasury")
    # The group's other member is told; the editor, who may not decide, is in it too.
    assert set(
        Notification.objects.filter(approval=approval, channel="email").values_list(
            "recipient_name", flat=True
        )
    ) == {"fiona", "rita"}
    for user, why in [(second_reviewer, "only members of 'treasury'"), (reviewer, "edited")]:
        with assert_unchanged(), pytest.raises(PermissionDenied, match=why):
            _decide(approval.pk, user, capture)
    _decide(approval.pk, fiona, capture)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.APPROVED


def test_a_call_its_server_declares_read_only_is_classified_again_as_declared(
    operator, reviewer, django_capture_on_commit_callbacks
):
    """The declared risk (an MCP server's annotations) is kept with the step: classified
    again without it, an unknown tool would count as high risk and start over."""
    RiskRule.objects.create(
        pattern="lookup_*", condition="limit > 100", risk="medium", required_approvals=1
    )
    actor = Actor.for_user(operator)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=actor, agent="client", goal="look orders up")
    with django_capture_on_commit_callbacks(execute=True):
        step = step_append(
            actor=actor,
            run_id=run.pk,
            tool="lookup_orders",
            args={"limit": 500},
            executor="client",
            declared_risk="low",
        )
    approval = ApprovalRequest.objects.get(step=step)
    _decide(approval.pk, reviewer, django_capture_on_commit_callbacks, args={"limit": 50})
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.APPROVED


def test_the_api_starts_the_approval_over_and_refuses_the_editor(
    transfer_rules, operator, reviewer, django_capture_on_commit_callbacks
):
    _, approval = _transfer(operator, django_capture_on_commit_callbacks, SMALL)
    client = token_client(reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(approval_url(approval.pk, "approve"), {"args": LARGE}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["risk"], body["required_approvals"]) == (
        "pending",
        "critical",
        2,
    )
    assert (body["decisions"], body["step"]["args"]) == ([], LARGE)
    with assert_unchanged():
        again = client.post(approval_url(approval.pk, "approve"), {}, format="json")
    assert again.status_code == 403


def test_the_inbox_says_the_approval_starts_over_and_shows_the_editor_why_they_may_not_decide(
    transfer_rules, client, operator, reviewer, second_reviewer, django_capture_on_commit_callbacks
):
    _, approval = _transfer(operator, django_capture_on_commit_callbacks, SMALL)
    client.force_login(reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("approval-decide", args=[approval.pk]),
            {"decision": "approve", "comment": "the real amount", "args": '{"amount": 5000000}'},
        )
    assert response.status_code == 302
    (message,) = [str(m) for m in get_messages(response.wsgi_request)]
    assert "needs a stricter approval (critical risk, 2 approvals)" in message
    assert "your approval does not count" in message
    page = client.get(reverse("approval-inbox")).content.decode()
    assert "You edited these arguments, and they need a stricter approval" in page
    assert "0 of 2 needed" in page
    client.force_login(second_reviewer)
    page = client.get(reverse("approval-inbox")).content.decode()
    assert "data-decide-form" in page
    assert "arguments edited by rita need a stricter approval" in page


def test_admin_bulk_approval_by_the_editor_is_refused(
    transfer_rules, client, operator, django_capture_on_commit_callbacks
):
    ada = make_user("ada", superuser=True)
    _, approval = _transfer(operator, django_capture_on_commit_callbacks, SMALL)
    _decide(approval.pk, ada, django_capture_on_commit_callbacks, args=LARGE)
    client.force_login(ada)
    with assert_unchanged():
        response = client.post(
            reverse("admin:approvals_approvalrequest_changelist"),
            {
                "action": "approve_selected",
                "_selected_action": [approval.pk],
                "apply": "yes",
                "comment": "bulk",
            },
            follow=True,
        )
    assert "arguments they edited into a stricter policy" in response.content.decode()


def _policy(**fields: Any) -> ApprovalPolicy:
    return ApprovalPolicy(**{"approvals": 1, "ttl_seconds": 60, **fields})


@pytest.mark.parametrize(
    ("old", "fresh", "stricter"),
    [
        (_policy(), _policy(), []),
        (_policy(), _policy(approvals=2), ["2 approvals instead of 1"]),
        (_policy(approvals=2), _policy(), []),
        (_policy(), _policy(approvers="a"), ["only members of a (was any reviewer)"]),
        (_policy(approvers="a"), _policy(), []),
        (_policy(approvers="a"), _policy(approvers="b"), ["only members of b (was a)"]),
        (
            _policy(approvers="a", escalation_group="e"),
            _policy(approvers="a"),
            ["only members of a (was a or e)"],
        ),
        (_policy(approvers="a"), _policy(approvers="a", escalation_group="e"), []),
        (_policy(requester_may_decide=True), _policy(), ["requesters may not decide"]),
        (_policy(), _policy(on_expiry="fail"), ["expiry fails the run"]),
        (_policy(), _policy(ttl_seconds=5, reason="other"), []),
    ],
)
def test_what_makes_a_policy_stricter(
    old: ApprovalPolicy, fresh: ApprovalPolicy, stricter: list[str]
) -> None:
    assert fresh.stricter_than(old) == stricter


def test_a_restarted_policy_never_asks_less_than_the_one_it_replaces() -> None:
    old = _policy(approvals=3, approvers="a", on_expiry="fail", escalate_after_seconds=9)
    fresh = _policy(approvals=2, approvers="b", ttl_seconds=30, reason="rule b")
    tightened = old.tightened_by(fresh, edited_by=7)
    assert tightened == _policy(
        approvals=3, approvers="b", on_expiry="fail", ttl_seconds=30, reason="rule b", edited_by=7
    )
    # Any reviewer under the fresh rule: the old group stays, with its escalation.
    tightened = old.tightened_by(_policy(approvals=4), edited_by=None)
    assert tightened == _policy(
        approvals=4, approvers="a", on_expiry="fail", escalate_after_seconds=9
    )
