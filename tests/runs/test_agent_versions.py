"""What drives a run (``runs.control.identity``): the agent's name and version, the system
prompt kept once per distinct text and project (SHA-256), with the client's name and version
label, the model and its parameters; reported at creation or with a model turn, refused whole
when malformed, and the runs list and overview filtering and grouping by them, only over the
projects the user may see."""

from __future__ import annotations

import hashlib

import pytest
from django.urls import reverse

from audit.models import AuditEvent
from projects.models import Project
from runs.models import ModelCall, Run, SystemPrompt
from tests.api.conftest import RUNS_URL, run_url, token_client
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

POLICY = "You are the refunds desk. Refund at most $100."
NEW_POLICY = "You are the refunds desk. Refund at most $150."


def client_run(api, **identity):
    made = api.post(RUNS_URL, {"agent": "client", "goal": "refunds", **identity}, format="json")
    assert made.status_code == 201, made.content
    return made.json()


def prompt(content=POLICY, name="refunds", version="v1"):
    return {"content": content, "name": name, "version": version}


@pytest.fixture
def api(operator):
    return token_client(operator)


def test_a_run_records_its_agent_prompt_model_and_parameters(api):
    body = client_run(
        api,
        agent_name="refunds desk",
        agent_version="1.4.0",
        prompt=prompt(),
        model="gpt-4o",
        model_parameters={"temperature": 0.2, "stop": ["END"]},
    )
    digest = hashlib.sha256(POLICY.encode()).hexdigest()
    assert (body["agent_name"], body["agent_version"], body["model"]) == (
        "refunds desk",
        "1.4.0",
        "gpt-4o",
    )
    assert body["prompt"] == {"sha256": digest, "name": "refunds", "version": "v1"}
    assert body["model_parameters"] == {"temperature": 0.2, "stop": ["END"]}
    stored = SystemPrompt.objects.get()
    assert (stored.sha256, stored.content) == (digest, POLICY)
    created = AuditEvent.objects.get(run_id=body["id"], verb="run.created")
    assert created.payload["identity"]["prompt"] == {
        "sha256": digest,
        "name": "refunds",
        "version": "v1",
    }


def test_a_prompt_is_kept_once_per_distinct_text_and_project(api, seeded):
    first = client_run(api, prompt=prompt(version="v1"))
    second = client_run(api, prompt=prompt(version="v1-relabelled"))
    client_run(api, prompt=prompt(NEW_POLICY, version="v2"))
    beta = Project.objects.create(slug="beta", name="Beta")
    beta_user = make_user("bea", "operator", project=beta)
    other = client_run(token_client(beta_user, beta), prompt=prompt())
    assert first["prompt"]["sha256"] == second["prompt"]["sha256"] == other["prompt"]["sha256"]
    assert second["prompt"]["version"] == "v1-relabelled"
    counts = {
        (row.project.slug, row.content) for row in SystemPrompt.objects.select_related("project")
    }
    assert counts == {("default", POLICY), ("default", NEW_POLICY), ("beta", POLICY)}
    assert SystemPrompt.objects.count() == 3


def test_a_turn_reports_what_drove_it_and_the_next_turn_keeps_it(api):
    run = client_run(api, agent_name="refunds desk", agent_version="1.4.0", prompt=prompt())
    turn = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    usage = {"model": "gpt-4o-mini", "input_tokens": 10, "output_tokens": 2}
    answer = api.post(
        run_url(run["id"], "messages"),
        {
            "messages": turn,
            "usage": usage,
            "agent_version": "1.5.0",
            "prompt": prompt(NEW_POLICY, version="v2"),
            "model_parameters": {"temperature": 0.7},
        },
        format="json",
    )
    assert answer.status_code == 201, answer.content
    assert answer.json()["agent_version"] == "1.5.0"
    assert answer.json()["prompt"]["version"] == "v2"
    assert answer.json()["model"] == "gpt-4o-mini"
    api.post(run_url(run["id"], "messages"), {"messages": turn, "usage": usage}, format="json")
    stored = Run.objects.select_related("prompt").get(pk=run["id"])
    assert (stored.agent_name, stored.agent_version, stored.prompt.content) == (
        "refunds desk",
        "1.5.0",
        NEW_POLICY,
    )
    calls = list(ModelCall.objects.filter(run_id=run["id"]).select_related("prompt"))
    assert [(c.prompt.content, c.parameters) for c in calls] == [
        (NEW_POLICY, {"temperature": 0.7}),
        (NEW_POLICY, {"temperature": 0.7}),
    ]
    changes = [
        event.payload.get("identity")
        for event in AuditEvent.objects.filter(
            run_id=run["id"], verb="run.messages_appended"
        ).order_by("id")
    ]
    assert changes[0]["agent_version"] == "1.5.0"
    assert changes[0]["prompt"]["version"] == "v2"
    assert changes[1] is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("prompt", "just text"),
        ("prompt", {"content": ""}),
        ("prompt", {"content": "x", "label": "v1"}),
        ("prompt", {"content": "nul \x00 inside"}),
        ("prompt", {"content": "x", "version": "v" * 101}),
        ("agent_version", "v" * 101),
        ("agent_name", "   "),
        ("model_parameters", {"blob": "x" * 5000}),
    ],
)
def test_a_malformed_report_is_a_400_and_changes_nothing(api, field, value):
    run = client_run(api, agent_name="desk", agent_version="1.0", prompt=prompt())
    turn = [{"role": "user", "content": "hi"}]
    with assert_unchanged():
        created = api.post(RUNS_URL, {"agent": "client", "goal": "x", field: value}, format="json")
        appended = api.post(
            run_url(run["id"], "messages"), {"messages": turn, field: value}, format="json"
        )
    assert (created.status_code, appended.status_code) == (400, 400)
    assert field in str(created.json())


def test_the_runs_list_filters_by_agent_and_prompt_version(api, client, operator):
    old = client_run(api, agent_name="desk", agent_version="1.0", prompt=prompt(version="v1"))
    new = client_run(
        api, agent_name="desk", agent_version="2.0", prompt=prompt(NEW_POLICY, version="v2")
    )

    def listed(**query):
        page = api.get(RUNS_URL, query)
        assert page.status_code == 200, page.content
        return [run["id"] for run in page.json()["results"]]

    assert listed(agent_version="1.0") == [old["id"]]
    assert listed(agent_name="desk", agent_version="2.0") == [new["id"]]
    assert listed(prompt_version="v2") == [new["id"]]
    assert listed(prompt_sha256=old["prompt"]["sha256"]) == [old["id"]]
    assert listed(agent_version="3.0") == []
    assert api.get(RUNS_URL, {"agent_version": "v" * 101}).status_code == 400
    client.force_login(operator)
    html = client.get(reverse("run-list"), {"prompt_version": "v2"}).content.decode()
    assert f'data-run-id="{new["id"]}"' in html
    assert f'data-run-id="{old["id"]}"' not in html
    assert "prompt refunds v2" in html


def test_another_project_s_versions_are_neither_listed_nor_counted(api, client, operator):
    client_run(api, agent_name="desk", agent_version="1.0")
    beta = Project.objects.create(slug="beta", name="Beta")
    beta_api = token_client(make_user("bea", "operator", project=beta), beta)
    client_run(beta_api, agent_name="desk", agent_version="1.0")
    client_run(beta_api, agent_name="beta bot", agent_version="9.9")
    assert api.get(RUNS_URL, {"agent_version": "9.9"}).json()["results"] == []
    client.force_login(operator)
    data = client.get(reverse("fleet-overview-data"), {"agent_name": "desk"}).json()
    assert [(g["agent_name"], g["agent_version"], g["runs"]) for g in data["by_version"]] == [
        ("desk", "1.0", 1)
    ]
    assert data["totals"]["runs"] == 1


def test_the_overview_groups_and_filters_by_agent_and_prompt_version(api, client, operator):
    for version, label in (("1.0", "v1"), ("1.0", "v1"), ("2.0", "v2")):
        client_run(api, agent_name="desk", agent_version=version, prompt=prompt(version=label))
    client_run(api)
    client.force_login(operator)
    data = client.get(reverse("fleet-overview-data")).json()
    groups = [
        (g["agent_name"], g["agent_version"], g["prompt_name"], g["prompt_version"], g["runs"])
        for g in data["by_version"]
    ]
    assert groups == [
        ("desk", "1.0", "refunds", "v1", 2),
        ("", "", "", "", 1),
        ("desk", "2.0", "refunds", "v2", 1),
    ]
    narrowed = client.get(reverse("fleet-overview-data"), {"prompt_version": "v2"}).json()
    assert narrowed["totals"]["runs"] == 1
    assert [g["agent_version"] for g in narrowed["by_version"]] == ["2.0"]
    bad = client.get(reverse("fleet-overview-data"), {"agent_version": "v" * 101})
    assert (bad.status_code, bad.json()["field"]) == (400, "agent_version")
    page = client.get(reverse("fleet-overview"), {"agent_version": "2.0"}).content.decode()
    assert 'data-versions="agent_version=2.0"' in page


def test_the_run_page_shows_what_drives_the_run_with_links_to_its_versions(api, client, operator):
    run = client_run(
        api, agent_name="refunds desk", agent_version="2.0", prompt=prompt(version="v2")
    )
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[run["id"]])).content.decode()
    assert "?agent_name=refunds%20desk&amp;agent_version=2.0" in html
    assert "?prompt_name=refunds&amp;prompt_version=v2" in html
    bare = client_run(api)
    html = client.get(reverse("run-detail", args=[bare["id"]])).content.decode()
    assert "data-run-agent-version" not in html
    assert "data-run-prompt-version" not in html


def test_a_fork_goes_on_with_its_source_s_agent_prompt_and_model(
    api, django_capture_on_commit_callbacks
):
    steps = [
        {"tool": "echo", "args": {"value": 1}},
        {"tool": "calculate", "args": {"expression": "2"}},
    ]
    body = {
        "agent": "plan",
        "goal": "g",
        "steps": steps,
        "agent_name": "desk",
        "agent_version": "1.0",
        "prompt": prompt(),
        "model": "gpt-4o",
        "model_parameters": {"temperature": 0},
    }
    with django_capture_on_commit_callbacks(execute=True):
        source = api.post(RUNS_URL, body, format="json").json()
    with django_capture_on_commit_callbacks(execute=True):
        forked = api.post(run_url(source["id"], "fork"), {"from_index": 1}, format="json")
    assert forked.status_code == 201
    fork = api.get(run_url(forked.json()["id"])).json()
    keys = ("agent_name", "agent_version", "prompt", "model", "model_parameters")
    assert {key: fork[key] for key in keys} == {key: source[key] for key in keys}
