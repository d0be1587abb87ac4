"""Django admin: every model's pages load, the audit log is read-only, actions call services."""

import pytest
from django.urls import reverse

from agentops.actors import Actor
from approvals.models import ApprovalStatus, RiskRule
from approvals.services import approval_decide
from audit.models import AuditEvent
from projects.services import project_default
from runs.control.sessions import session_create
from runs.models import RunStatus
from tests.pages.conftest import SEND_EMAIL
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

MODELS = [
    "runs/run",
    "runs/agentsession",
    "runs/step",
    "runs/stepattempt",
    "runs/checkpoint",
    "runs/toolcall",
    "approvals/approvalrequest",
    "approvals/approvaldecision",
    "approvals/riskrule",
    "audit/auditevent",
]


@pytest.fixture
def admin_client(client, seeded):
    client.force_login(make_user("ada", superuser=True))
    return client


def test_changelist_and_detail_pages_load(admin_client, awaiting_run, make_run, reviewer):
    rejected = make_run([SEND_EMAIL], goal="rejected mail")
    approval_decide(
        approval_id=rejected.approvals.get().pk,
        actor=Actor.for_user(reviewer),
        decision="reject",
        comment="no",
    )
    session_create(actor=Actor.for_user(reviewer), project=project_default(), external_id="s")
    for model in MODELS:
        response = admin_client.get(f"/admin/{model}/")
        assert response.status_code == 200, model
        app_label, model_name = model.split("/")
        obj = response.context["cl"].result_list[0]
        url = reverse(f"admin:{app_label}_{model_name}_change", args=[obj.pk])
        assert admin_client.get(url).status_code == 200, model


def test_audit_events_cannot_be_added_changed_or_deleted(admin_client, awaiting_run):
    event = AuditEvent.objects.first()
    assert admin_client.get(reverse("admin:audit_auditevent_add")).status_code == 403
    delete_url = reverse("admin:audit_auditevent_delete", args=[event.pk])
    with assert_unchanged():
        assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    change_url = reverse("admin:audit_auditevent_change", args=[event.pk])
    with assert_unchanged():
        admin_client.post(change_url, {"verb": "forged"})
    event.refresh_from_db()
    assert event.verb != "forged"
    changelist = admin_client.get(reverse("admin:audit_auditevent_changelist"))
    assert changelist.context["action_form"] is None  # not even "delete selected"


def test_run_status_is_not_editable(admin_client, awaiting_run):
    response = admin_client.get(reverse("admin:runs_run_change", args=[awaiting_run.pk]))
    assert "status" not in response.context["adminform"].form.fields


def test_approve_selected_action_approves_through_the_service(
    admin_client, awaiting_run, django_capture_on_commit_callbacks
):
    approval = awaiting_run.approvals.get()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            reverse("admin:approvals_approvalrequest_changelist"),
            {
                "action": "approve_selected",
                "_selected_action": [approval.pk],
                "apply": "yes",
                "comment": "checked the list",
            },
            follow=True,
        )
    assert "Recorded approve on 1 request(s)." in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.decisions.get().reviewer_name == "ada"
    assert approval.decisions.get().comment == "checked the list"
    awaiting_run.refresh_from_db()
    assert awaiting_run.status == RunStatus.SUCCEEDED


def test_reject_selected_reports_requests_that_are_not_pending(admin_client, awaiting_run):
    approval = awaiting_run.approvals.get()
    url = reverse("admin:approvals_approvalrequest_changelist")
    data = {
        "action": "reject_selected",
        "_selected_action": [approval.pk],
        "apply": "yes",
        "comment": "duplicate",
    }
    admin_client.post(url, data)
    response = admin_client.post(url, data, follow=True)
    assert "not pending" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.REJECTED


def test_cancel_selected_runs_action(admin_client, awaiting_run):
    response = admin_client.post(
        reverse("admin:runs_run_changelist"),
        {"action": "cancel_selected", "_selected_action": [awaiting_run.pk]},
        follow=True,
    )
    assert "Cancelled 1 run(s)." in response.content.decode()
    awaiting_run.refresh_from_db()
    assert awaiting_run.status == RunStatus.CANCELLED


def test_risk_rules_are_editable(admin_client):
    rule = RiskRule.objects.get(pattern="send_*")
    response = admin_client.post(
        reverse("admin:approvals_riskrule_change", args=[rule.pk]),
        {
            "pattern": "send_*",
            "risk": "critical",
            "priority": rule.priority,
            "enabled": "on",
            "on_expiry": "reject",
        },
    )
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.risk == "critical"
