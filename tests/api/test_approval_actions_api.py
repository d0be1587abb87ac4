"""What the inbox page can do, the API does too: respond to the agent, decide a selection in
bulk under the same four-eyes rules, snooze, and assign to oneself. Another project's request
is a 404, the wrong role a 403, bad input a 400 that changes nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalMark, ApprovalRequest
from audit.models import AuditEvent
from projects.models import Project
from projects.roles import Role
from runs.models import Step, StepStatus
from tests.api.conftest import APPROVALS_URL, approval_url, token_client
from testsupport.factories import make_user, run_awaiting_approval
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db
BULK_URL = f"{APPROVALS_URL}bulk/"


@pytest.fixture
def waiting(operator, django_capture_on_commit_callbacks):
    """Three requests of the operator's runs, pending."""
    runs = [
        run_awaiting_approval(
            operator, capture=django_capture_on_commit_callbacks, goal=f"mail {i}"
        )
        for i in range(3)
    ]
    return [run.approvals.get().pk for run in runs]


@pytest.fixture
def elsewhere(django_capture_on_commit_callbacks):
    """A pending request in project beta, where the default project's reviewers are nobody."""
    beta = Project.objects.create(slug="beta", name="Beta")
    beth = make_user("beth", Role.OPERATOR, project=beta)
    run = run_awaiting_approval(beth, capture=django_capture_on_commit_callbacks, project=beta)
    return run.approvals.get().pk


def test_respond_sends_the_answer_to_the_agent(reviewer_api, reviewer, waiting):
    response = reviewer_api.post(
        approval_url(waiting[0], "respond"), {"comment": "Use the other address"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "rejected"
    (decision,) = response.json()["decisions"]
    assert (decision["decision"], decision["comment"]) == ("respond", "Use the other address")
    step = Step.objects.get(approval__pk=waiting[0])
    assert step.status == StepStatus.REJECTED
    assert step.error["type"] == "responded"
    assert step.error["message"] == "Use the other address"


@pytest.mark.parametrize(
    "body",
    [{}, {"comment": ""}, {"comment": "   "}, {"comment": "x", "args": {}}, {"comment": ["a"]}],
)
def test_a_response_without_its_answer_is_a_400_changing_nothing(reviewer_api, waiting, body):
    with assert_unchanged():
        response = reviewer_api.post(approval_url(waiting[0], "respond"), body, format="json")
    assert response.status_code == 400, response.json()


def test_bulk_rejection_decides_each_with_the_comment(reviewer_api, reviewer, waiting):
    response = reviewer_api.post(
        BULK_URL,
        {"ids": [waiting[0], waiting[2], waiting[0]], "decision": "reject", "comment": "duplicate"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json() == {"decided": [waiting[0], waiting[2]], "refused": {}}
    statuses = dict(ApprovalRequest.objects.values_list("pk", "status"))
    assert [statuses[pk] for pk in waiting] == ["rejected", "pending", "rejected"]
    reasons = Step.objects.filter(approval__pk__in=[waiting[0], waiting[2]])
    assert {step.error["reason"] for step in reasons} == {"duplicate"}


def test_bulk_keeps_the_four_eyes_rule_per_request(waiting, django_capture_on_commit_callbacks):
    omar = make_user("omar", Role.OPERATOR, Role.REVIEWER)
    own = run_awaiting_approval(omar, capture=django_capture_on_commit_callbacks).approvals.get()
    response = token_client(omar).post(
        BULK_URL, {"ids": [own.pk, waiting[1]], "decision": "approve"}, format="json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["decided"] == [waiting[1]]
    assert list(body["refused"]) == [str(own.pk)]
    own.refresh_from_db()
    assert own.status == "pending"


def test_bulk_refuses_other_projects_and_unknown_ids_alike(reviewer_api, waiting, elsewhere):
    response = reviewer_api.post(
        BULK_URL, {"ids": [elsewhere, 999999, waiting[1]], "decision": "approve"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "decided": [waiting[1]],
        "refused": {str(elsewhere): "no such request", "999999": "no such request"},
    }
    assert ApprovalRequest.objects.get(pk=elsewhere).status == "pending"


@pytest.mark.parametrize(
    "body",
    [
        {"ids": [], "decision": "approve"},
        {"ids": ["one"], "decision": "approve"},
        {"ids": [0], "decision": "approve"},
        {"ids": list(range(1, 203)), "decision": "approve"},
        {"ids": [1], "decision": "maybe"},
        {"ids": [1], "decision": "reject"},
        {"ids": [1], "decision": "respond", "comment": "  "},
        {"ids": [1], "decision": "approve", "extra": 1},
        {"ids": "1", "decision": "approve"},
    ],
)
def test_bad_bulk_input_is_a_400_deciding_nothing(reviewer_api, waiting, body):
    body = (
        {**body, "ids": [waiting[0] if i == 1 else i for i in body["ids"]]}
        if isinstance(body["ids"], list)
        else body
    )
    with assert_unchanged():
        response = reviewer_api.post(BULK_URL, body, format="json")
    assert response.status_code == 400, response.json()


def test_deciding_needs_the_reviewer_role(operator_api, waiting):
    with assert_unchanged():
        assert (
            operator_api.post(
                BULK_URL, {"ids": waiting, "decision": "approve"}, format="json"
            ).status_code
            == 403
        )
        response = operator_api.post(
            approval_url(waiting[0], "respond"), {"comment": "no"}, format="json"
        )
    assert response.status_code == 403


def test_another_projects_request_is_a_404_for_every_action(reviewer_api, elsewhere):
    now = timezone.now()
    with assert_unchanged():
        for action, body in [
            ("respond", {"comment": "hi"}),
            ("snooze", {"until": (now + timedelta(hours=1)).isoformat()}),
            ("assign", {"assigned": True}),
        ]:
            response = reviewer_api.post(approval_url(elsewhere, action), body, format="json")
            assert response.status_code == 404, (action, response.json())
    assert not ApprovalMark.objects.exists()


def test_snooze_and_assign_are_the_callers_own_audited_marks(reviewer_api, reviewer, waiting):
    until = timezone.now() + timedelta(hours=4)
    response = reviewer_api.post(
        approval_url(waiting[0], "snooze"), {"until": until.isoformat()}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["approval"] == waiting[0]
    mark = ApprovalMark.objects.get(approval_id=waiting[0], user=reviewer)
    assert abs(mark.snoozed_until - until) < timedelta(seconds=1)
    response = reviewer_api.post(
        approval_url(waiting[0], "assign"), {"assigned": True}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["assigned_at"] is not None
    response = reviewer_api.post(approval_url(waiting[0], "snooze"), {"until": None}, format="json")
    assert response.json()["snoozed_until"] is None
    verbs = list(
        AuditEvent.objects.filter(object_type="approval", object_id=str(waiting[0]))
        .order_by("id")
        .values_list("verb", flat=True)
    )
    assert verbs[-3:] == ["approval.snoozed", "approval.assigned", "approval.unsnoozed"]


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("snooze", {}),
        ("snooze", {"until": "tomorrow"}),
        ("snooze", {"until": "2020-01-01T00:00:00Z"}),
        ("snooze", {"until": "2999-01-01T00:00:00Z"}),
        ("assign", {}),
        ("assign", {"assigned": "perhaps"}),
        ("assign", {"assigned": True, "who": "bob"}),
    ],
)
def test_bad_marks_are_a_400_changing_nothing(reviewer_api, waiting, action, body):
    with assert_unchanged():
        response = reviewer_api.post(approval_url(waiting[0], action), body, format="json")
    assert response.status_code == 400, response.json()
    assert not ApprovalMark.objects.exists()


def test_a_decided_request_cannot_be_marked(reviewer_api, waiting):
    reviewer_api.post(approval_url(waiting[0], "reject"), {"comment": "no"}, format="json")
    response = reviewer_api.post(
        approval_url(waiting[0], "assign"), {"assigned": True}, format="json"
    )
    assert response.status_code == 409


def test_the_schema_documents_the_new_actions(reviewer_api):
    paths = reviewer_api.get("/api/schema/", {"format": "json"}).json()["paths"]
    for path in (
        "/api/v1/approvals/bulk/",
        "/api/v1/approvals/{id}/respond/",
        "/api/v1/approvals/{id}/snooze/",
        "/api/v1/approvals/{id}/assign/",
    ):
        assert "post" in paths[path], path
    assert "get" in paths["/api/v1/approvals/reviewer/"]


def test_the_reviewer_endpoint_names_the_callers_groups(reviewer_api, reviewer, operator_api):
    from django.contrib.auth.models import Group

    for name in ("payments", "legal"):
        reviewer.groups.add(Group.objects.create(name=name))
    response = reviewer_api.get(f"{APPROVALS_URL}reviewer/")
    assert response.status_code == 200
    assert response.json() == {"groups": ["legal", "payments"]}
    assert operator_api.get(f"{APPROVALS_URL}reviewer/").json() == {"groups": []}


def test_a_new_requests_event_names_its_deciding_groups(waiting):
    event = AuditEvent.objects.get(verb="approval.created", object_id=str(waiting[0]))
    assert event.payload["groups"] == []
