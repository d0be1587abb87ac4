"""Validators declared in a risk rule: they check the results of the calls the rule matches,
after the tool's own, for the rule's project only (a global rule's for every project). They
are part of the project's policy: set by its admins through the policy API or admin, checked
when saved (a malformed one is a 400 and nothing changes), audited with their diff, and a
change moves the policy version on."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agentops.actors import Actor
from approvals.models import ApprovalRequest, RiskRule
from approvals.services import approval_decide
from audit.models import AuditEvent, project_chain
from runs.models import Run, RunStatus, Step, StepStatus, ToolCall
from tests.api.conftest import token_client
from tests.approvals.test_project_policy import Projects, _admin_form, policy_state, policy_url
from testsupport.factories import make_user, plan_run

pytestmark = pytest.mark.django_db

CAPPED = [{"condition": "total <= 500"}]


@pytest.fixture
def projects(seeded: None) -> Projects:
    return Projects()


def add_rule(projects: Projects, project: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Add a rule to ``project``'s policy through the API, as its admin; returns it."""
    admin = projects.ann if project == projects.alpha else projects.bea
    made = token_client(admin, project).post(
        policy_url(project, "risk-rules/"), {"risk": "low", **body}, format="json"
    )
    assert made.status_code == 201, made.content
    return made.json()


def echo_run(projects: Projects, project: Any, value: Any, capture) -> Run:
    """A plan run in ``project`` whose one step echoes ``value``."""
    user = projects.ann if project == projects.alpha else projects.bea
    steps = [{"tool": "echo", "args": {"value": value}}]
    return plan_run(user, steps, capture=capture, project=project)


def test_a_rules_validator_fails_the_step_under_the_rules_name(
    projects, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    add_rule(
        projects,
        projects.alpha,
        {"pattern": "echo", "description": "totals are capped", "validators": CAPPED},
    )
    run = echo_run(projects, projects.alpha, {"total": 900}, capture)
    assert run.status == RunStatus.FAILED
    step = run.steps.get()
    assert step.status == StepStatus.FAILED
    assert (step.error["type"], step.error["rule"], step.error["path"]) == (
        "validation_failed",
        "totals are capped",
        "(root)",
    )
    # The ledger keeps the result it refused; a result within the cap passes.
    call = ToolCall.objects.get(idempotency_key=step.idempotency_key)
    assert (call.status, call.result) == ("invalid", {"total": 900})
    assert echo_run(projects, projects.alpha, {"total": 20}, capture).status == RunStatus.SUCCEEDED


def test_a_rules_condition_limits_the_calls_its_validators_check(
    projects, django_capture_on_commit_callbacks
):
    add_rule(
        projects,
        projects.alpha,
        {
            "pattern": "echo",
            "condition": "value.total > 100",
            "validators": [{"condition": "total > 1000"}],
        },
    )
    capture = django_capture_on_commit_callbacks
    assert echo_run(projects, projects.alpha, {"total": 50}, capture).status == RunStatus.SUCCEEDED
    assert echo_run(projects, projects.alpha, {"total": 200}, capture).status == RunStatus.FAILED


def test_a_rules_gating_validator_holds_the_step_until_a_reviewer_approves(
    projects, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    schema = {"type": "object", "required": ["id"]}
    add_rule(
        projects,
        projects.alpha,
        {
            "pattern": "echo",
            "validators": [{"rule": "has an id", "schema": schema, "on_failure": "gate"}],
        },
    )
    run = echo_run(projects, projects.alpha, {"total": 1}, capture)
    assert run.status_info.value == "awaiting_approval"
    step = run.steps.get()
    assert (step.error["rule"], step.result) == ("has an id", {"total": 1})
    approval = ApprovalRequest.objects.get(step=step)
    assert "has an id" in approval.policy["reason"]
    reviewer = make_user("rita", "reviewer", project=projects.alpha)
    with capture(execute=True):
        approval_decide(approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve")
    step = Step.objects.get(pk=step.pk)
    assert (step.status, step.result, step.error) == (StepStatus.SUCCEEDED, {"total": 1}, None)
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED


def test_another_projects_rule_never_checks_this_projects_results(
    projects, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    add_rule(projects, projects.beta, {"pattern": "echo", "validators": CAPPED})
    assert echo_run(projects, projects.alpha, {"total": 900}, capture).status == RunStatus.SUCCEEDED
    assert echo_run(projects, projects.beta, {"total": 900}, capture).status == RunStatus.FAILED


def test_a_global_rules_validators_check_every_projects_results(
    projects, django_capture_on_commit_callbacks
):
    RiskRule.objects.create(pattern="echo", risk="low", priority=1, validators=CAPPED)
    capture = django_capture_on_commit_callbacks
    for project in (projects.alpha, projects.beta):
        run = echo_run(projects, project, {"total": 900}, capture)
        assert (run.status, run.steps.get().error["rule"]) == (RunStatus.FAILED, "echo")


@pytest.mark.parametrize(
    "validators",
    [
        [{"schema": {"type": 5}}],
        [{"check": "tests.tools.no_such_check"}],
        [{"check": "tests.tools.EFFECTS"}],
        [{"condition": "__import__('os')"}],
        [{"condition": "x > 1", "schema": {}}],
        [{"condition": "x > 1", "on_failure": "gate", "retry": True}],
        [{"condition": "x > 1", "on_failure": "ignore"}],
        [{"condition": "x > 1", "rule": ""}],
        [{"condition": "x > 1", "extra": 1}],
        [{"condition": "x > 1", "retry": "yes"}],
        ["x > 1"],
        {"condition": "x > 1"},
    ],
)
def test_a_malformed_validator_is_a_400_and_nothing_changes(projects, validators):
    api = token_client(projects.ann, projects.alpha)
    before = policy_state()
    added = api.post(
        policy_url(projects.alpha, "risk-rules/"),
        {"pattern": "echo", "risk": "low", "validators": validators},
        format="json",
    )
    assert added.status_code == 400, added.content
    assert added.json()["field"] == "validators"
    changed = api.patch(
        policy_url(projects.alpha, f"risk-rules/{projects.rule_a.pk}/"),
        {"validators": validators},
        format="json",
    )
    assert changed.status_code == 400, changed.content
    assert policy_state() == before


def test_a_validator_change_is_audited_with_its_diff_and_moves_the_version(projects):
    rule = add_rule(projects, projects.alpha, {"pattern": "echo"})
    assert rule["validators"] == []
    api = token_client(projects.ann, projects.alpha)
    changed = api.patch(
        policy_url(projects.alpha, f"risk-rules/{rule['id']}/"),
        {"validators": CAPPED},
        format="json",
    )
    assert changed.json()["validators"] == CAPPED
    event = AuditEvent.objects.filter(chain=project_chain(projects.alpha.pk)).latest("pk")
    assert event.payload["diff"] == [{"op": "add", "path": "/validators/0", "value": CAPPED[0]}]
    assert event.payload["version"] == 2
    policy = api.get(policy_url(projects.alpha)).json()
    assert policy["version"] == 2
    assert [r["validators"] for r in policy["risk_rules"] if r["id"] == rule["id"]] == [CAPPED]
    # Beta's admin can neither read nor change them.
    other = token_client(projects.bea, projects.beta)
    url = policy_url(projects.alpha, f"risk-rules/{rule['id']}/")
    assert other.patch(url, {"validators": []}, format="json").status_code == 404
    assert RiskRule.objects.get(pk=rule["id"]).validators == CAPPED


def test_admin_refuses_a_malformed_validator_and_changes_nothing(projects):
    client = Client()
    client.force_login(projects.ann)
    before = policy_state()
    form = {
        **_admin_form(projects.alpha, "echo"),
        "validators": '[{"check": "nowhere.nothing"}]',
    }
    response = client.post("/admin/approvals/riskrule/add/", form)
    assert response.status_code == 200
    assert "cannot be imported" in response.content.decode()
    assert policy_state() == before


def test_a_project_admin_sets_validators_in_admin_audited_in_the_projects_chain(projects):
    client = Client()
    client.force_login(projects.ann)
    form = {**_admin_form(projects.alpha, "echo"), "validators": '[{"condition": "total < 9"}]'}
    response = client.post("/admin/approvals/riskrule/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    rule = RiskRule.objects.get(project=projects.alpha, pattern="echo")
    assert rule.validators == [{"condition": "total < 9"}]
    event = AuditEvent.objects.get(chain=project_chain(projects.alpha.pk))
    assert event.payload["after"]["validators"] == [{"condition": "total < 9"}]
    projects.alpha.refresh_from_db()
    assert projects.alpha.policy_version == 1
