"""Per-project policy: a project's admins read and change their project's risk rules and tool
grant (API and admin); nobody else can, not even an admin of another project, and a refused
change changes nothing. Every change is in the project's audit chain with its before, after
and diff, and moves the project's policy version on. A project's rules come before the
global defaults and apply to its runs only; a ``deny`` rule refuses its calls before any
gate."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agentops.actors import Actor
from approvals.models import ApprovalRequest, RiskRule
from audit.models import AuditEvent, project_chain
from audit.selectors import chain_verify
from projects.models import Project
from runs.control.create import run_create, step_append
from runs.models import StepStatus, ToolCall
from tests.api.conftest import token_client
from testsupport.factories import make_user, send_email_step
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


class Projects:
    """Projects alpha and beta, each with an admin (staff, so they may use admin) and a rule
    of its own; alpha also has an operator."""

    def __init__(self) -> None:
        self.alpha = Project.objects.create(slug="alpha", name="Alpha")
        self.beta = Project.objects.create(slug="beta", name="Beta")
        self.ann = make_user("ann", "operator", "reviewer", project=self.alpha)
        self.bea = make_user("bea", "operator", "reviewer", project=self.beta)
        self.olga = make_user("olga", "operator", project=self.alpha)
        for user in (self.ann, self.bea):
            user.is_staff = True
            user.save()
        self.rule_a = RiskRule.objects.create(project=self.alpha, pattern="a_*", risk="low")
        self.rule_b = RiskRule.objects.create(project=self.beta, pattern="b_*", risk="high")


@pytest.fixture
def projects(seeded: None) -> Projects:
    return Projects()


def policy_url(project: Project, tail: str = "") -> str:
    return f"/api/v1/projects/{project.slug}/policy/{tail}"


def policy_state() -> list[Any]:
    """What a policy change writes: the rules, the projects (grant, version) and the log."""
    return [
        list(RiskRule.objects.order_by("pk").values()),
        list(Project.objects.order_by("pk").values()),
        list(AuditEvent.objects.order_by("pk").values_list("pk", flat=True)),
    ]


def test_a_project_admin_reads_their_projects_policy(projects):
    body = token_client(projects.ann, projects.alpha).get(policy_url(projects.alpha)).json()
    assert body["project"] == "alpha"
    assert [rule["pattern"] for rule in body["risk_rules"]] == ["a_*"]
    # The global defaults it extends are shown apart; beta's rule is not among them.
    patterns = {rule["pattern"] for rule in body["default_risk_rules"]}
    assert "book_*" in patterns
    assert "b_*" not in patterns


@pytest.mark.parametrize(
    ("method", "tail", "body"),
    [
        ("get", "", None),
        ("put", "grant/", {"grant": {"tools": ["x"]}}),
        ("post", "risk-rules/", {"pattern": "evil_*", "risk": "low"}),
        ("patch", "risk-rules/{rule}/", {"risk": "low"}),
        ("delete", "risk-rules/{rule}/", None),
    ],
)
def test_another_projects_admin_can_neither_read_nor_change_its_policy(
    projects, method, tail, body
):
    # Ann administers alpha; as superuser-less member of alpha only, beta does not exist
    # for her, with her session or her token.
    url = policy_url(projects.beta, tail.format(rule=projects.rule_b.pk))
    clients = (token_client(projects.ann, projects.alpha), _signed_in(projects.ann))
    before = policy_state()
    for client in clients:
        with assert_unchanged():
            response = getattr(client, method)(url, body, content_type="application/json")
        assert response.status_code == 404, response.content
        assert "beta" not in response.content.decode()
    assert policy_state() == before


def test_an_operator_may_not_read_or_change_their_own_projects_policy(projects):
    api = token_client(projects.olga, projects.alpha)
    before = policy_state()
    assert api.get(policy_url(projects.alpha)).status_code == 404
    refused = api.put(policy_url(projects.alpha, "grant/"), {"grant": None}, format="json")
    assert refused.status_code == 404
    assert policy_state() == before


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_rule_change_is_audited_in_the_projects_chain_with_its_diff(projects):
    api = token_client(projects.ann, projects.alpha)
    made = api.post(
        policy_url(projects.alpha, "risk-rules/"),
        {"pattern": "send_*", "condition": "len(to) > 3", "risk": "critical"},
        format="json",
    )
    assert made.status_code == 201, made.content
    rule_id = made.json()["id"]
    changed = api.patch(
        policy_url(projects.alpha, f"risk-rules/{rule_id}/"), {"risk": "deny"}, format="json"
    )
    assert changed.json()["risk"] == "deny"
    assert api.delete(policy_url(projects.alpha, f"risk-rules/{rule_id}/")).status_code == 204
    events = list(AuditEvent.objects.filter(chain=project_chain(projects.alpha.pk)).order_by("pk"))
    assert [e.verb for e in events] == ["policy.risk_rule_changed"] * 3
    created, updated, deleted = (e.payload for e in events)
    assert created["before"] is None
    assert created["after"]["condition"] == "len(to) > 3"
    assert updated["before"]["risk"] == "critical"
    assert updated["after"]["risk"] == "deny"
    assert updated["diff"] == [{"op": "replace", "path": "/risk", "value": "deny"}]
    assert deleted["after"] is None
    assert [e.payload["version"] for e in events] == [1, 2, 3]
    assert all(e.actor_name == "ann" and e.project_id == projects.alpha.pk for e in events)
    assert chain_verify(project_chain(projects.alpha.pk)).ok
    projects.alpha.refresh_from_db()
    assert projects.alpha.policy_version == 3
    # Beta's policy did not move.
    projects.beta.refresh_from_db()
    assert projects.beta.policy_version == 0


@pytest.mark.parametrize(
    "body",
    [
        {"pattern": "x_*", "risk": "low", "condition": "__import__('os')"},
        {"pattern": "x_*", "risk": "extreme"},
        {"pattern": "x_*", "risk": "low", "project": "beta"},
        {"pattern": "a_*", "risk": "low"},
        {"pattern": "x_*", "risk": "high", "ttl_seconds": 10, "remind_after_seconds": 60},
    ],
)
def test_a_malformed_rule_is_a_400_and_nothing_changes(projects, body):
    api = token_client(projects.ann, projects.alpha)
    before = policy_state()
    response = api.post(policy_url(projects.alpha, "risk-rules/"), body, format="json")
    assert response.status_code == 400, response.content
    assert policy_state() == before


def test_a_projects_rules_come_first_and_apply_to_its_runs_only(
    projects, django_capture_on_commit_callbacks
):
    # Alpha trusts send_email (low: no approval) and denies calculate; beta keeps the defaults.
    api = token_client(projects.ann, projects.alpha)
    for body in ({"pattern": "send_email", "risk": "low"}, {"pattern": "calc*", "risk": "deny"}):
        made = api.post(policy_url(projects.alpha, "risk-rules/"), body, format="json")
        assert made.status_code == 201
    capture = django_capture_on_commit_callbacks
    steps = [send_email_step(), {"tool": "calculate", "args": {"expression": "1"}}]
    with capture(execute=True):
        in_alpha = run_create(
            actor=Actor.for_user(projects.ann),
            agent="plan",
            goal="a",
            steps=steps,
            project=projects.alpha,
        )
        in_beta = run_create(
            actor=Actor.for_user(projects.bea),
            agent="plan",
            goal="b",
            steps=steps[1:],
            project=projects.beta,
        )
    alpha_steps = list(in_alpha.steps.order_by("index"))
    for step in alpha_steps:
        step.refresh_from_db()
    assert [s.status for s in alpha_steps] == [StepStatus.SUCCEEDED, StepStatus.REFUSED]
    assert alpha_steps[1].error["type"] == "not_granted"
    assert "a deny rule refuses this call" in alpha_steps[1].error["message"]
    assert not ToolCall.objects.filter(step=alpha_steps[1]).exists()
    assert [s.policy_version for s in alpha_steps] == [2, 2]
    in_beta.refresh_from_db()
    assert in_beta.status == "succeeded"
    assert not ApprovalRequest.objects.exists()


def test_a_deny_rule_refuses_a_client_call_and_the_agent_goes_on(
    projects, django_capture_on_commit_callbacks
):
    RiskRule.objects.create(project=projects.alpha, pattern="send_*", risk="deny")
    actor = Actor.for_user(projects.ann, via_api=True)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=actor, agent="client", goal="c", project=projects.alpha)
    with django_capture_on_commit_callbacks(execute=True):
        step = step_append(actor=actor, run_id=run.pk, tool="send_email", args=_email())
    assert (step.status, step.risk, step.error["type"]) == ("refused", "deny", "not_granted")
    assert not ApprovalRequest.objects.exists()
    run.refresh_from_db()
    assert run.status == "running"


def _email() -> dict[str, Any]:
    return {"to": ["a@example.com"], "subject": "s", "body": "b"}


# --- admin --------------------------------------------------------------------------------


def test_admin_shows_a_project_admin_only_their_projects_rules(projects):
    client = _signed_in(projects.ann)
    listing = client.get("/admin/approvals/riskrule/").content.decode()
    assert "a_*" in listing
    assert "b_*" not in listing
    assert "book_*" not in listing  # the global defaults are the superusers'
    opened = client.get(f"/admin/approvals/riskrule/{projects.rule_b.pk}/change/", follow=True)
    assert "b_*" not in opened.content.decode()


def test_admin_refuses_a_rule_for_another_project_and_changes_nothing(projects):
    client = _signed_in(projects.ann)
    before = policy_state()
    form = {**_admin_form(projects.beta, "evil_*"), "risk": "low"}
    response = client.post("/admin/approvals/riskrule/add/", form)
    assert response.status_code == 200  # the form again, with the error
    assert "Select a valid choice" in response.content.decode()
    deleted = client.post(
        f"/admin/approvals/riskrule/{projects.rule_b.pk}/delete/", {"post": "yes"}, follow=True
    )
    assert "b_*" not in deleted.content.decode()
    assert policy_state() == before


def test_a_rule_added_in_admin_is_audited_in_its_projects_chain(projects):
    response = _signed_in(projects.ann).post(
        "/admin/approvals/riskrule/add/", _admin_form(projects.alpha, "refund_*")
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    event = AuditEvent.objects.get(chain=project_chain(projects.alpha.pk))
    assert event.verb == "policy.risk_rule_changed"
    assert event.payload["after"]["pattern"] == "refund_*"
    assert {"op": "add", "path": "/pattern", "value": "refund_*"} in event.payload["diff"]


def _admin_form(project: Project, pattern: str) -> dict[str, Any]:
    return {
        "project": project.pk,
        "pattern": pattern,
        "condition": "",
        "risk": "high",
        "priority": 100,
        "enabled": "on",
        "applies_to_read_only": "on",
        "description": "",
        "on_expiry": "reject",
        "webhook_urls": "",
        "validators": "[]",
    }


def test_a_rule_moved_between_projects_leaves_one_policy_and_joins_the_other(projects):
    root = _signed_in(make_user("root", superuser=True))
    form = {**_admin_form(projects.beta, "a_*"), "risk": "low"}
    response = root.post(f"/admin/approvals/riskrule/{projects.rule_a.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    (left,) = AuditEvent.objects.filter(chain=project_chain(projects.alpha.pk))
    (joined,) = AuditEvent.objects.filter(chain=project_chain(projects.beta.pk))
    assert (left.payload["before"]["pattern"], left.payload["after"]) == ("a_*", None)
    assert (joined.payload["before"], joined.payload["after"]["pattern"]) == (None, "a_*")
    versions = dict(Project.objects.values_list("slug", "policy_version"))
    assert (versions["alpha"], versions["beta"]) == (1, 1)
