"""The run page's "Agent state" section: every version the agent wrote, each as a diff against
the one before (loaded when opened, bounded, escaped), earlier versions paged; a step's state
diff shows what the agent wrote for it next to the executor's bookkeeping."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from agentops.actors import Actor
from projects.models import Project
from projects.roles import Role
from runs.control.create import step_append
from runs.control.state import run_state_write
from runs.executor.client import step_report
from runs.models import Executor, Run
from runs.state_views import DIFF_ROWS_SHOWN, STATE_VERSIONS_SHOWN
from testsupport.factories import make_run, make_user

pytestmark = pytest.mark.django_db


def _diff_rows(html: str) -> list[tuple[str, str]]:
    return re.findall(r'data-diff-kind="(\w+)" data-diff-path="([^"]*)"', html)


@pytest.fixture
def client_run(operator, django_capture_on_commit_callbacks):
    return make_run(
        operator, agent="client", goal="remember", capture=django_capture_on_commit_callbacks
    )


def put(operator: Any, run: Run, base: int, state: Any, **options: Any) -> None:
    run_state_write(
        run_id=run.pk,
        actor=Actor.for_user(operator, via_api=True),
        base_version=base,
        operation="put",
        document=state,
        **options,
    )


def fragment(client: Any, run: Run, version: int) -> Any:
    return client.get(reverse("run-state-version", args=[run.pk, version]))


def test_the_page_lists_each_version_and_its_diff_against_the_one_before(
    client, operator, client_run
):
    put(operator, client_run, 0, {"goal": "refund", "plan": ["look up"]})
    put(
        operator,
        client_run,
        1,
        {"goal": "refund", "plan": ["look up", "refund"], "decided": "yes"},
        rationale="the order is eligible",
    )
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[client_run.pk])).content.decode()
    section = html[html.index('id="agent-state"') :]
    versions = re.findall(r'data-state-version="(\d+)"', section)
    assert versions == ["2", "1"]
    assert "Version 2 is current" in section
    assert "the order is eligible" in section
    assert f'data-lazy-src="{reverse("run-state-version", args=[client_run.pk, 2])}"' in section
    # The diffs themselves are loaded when opened.
    assert "data-diff-kind" not in section

    second = fragment(client, client_run, 2)
    assert second.status_code == 200
    assert _diff_rows(second.content.decode()) == [("added", "/decided"), ("added", "/plan/1")]
    first = fragment(client, client_run, 1)
    assert _diff_rows(first.content.decode()) == [("added", "/goal"), ("added", "/plan")]
    assert "The agent has written no state" not in html


def test_a_run_without_agent_state_says_so(client, operator, client_run):
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[client_run.pk])).content.decode()
    assert "The agent has written no state." in html
    assert fragment(client, client_run, 0).status_code == 200
    assert fragment(client, client_run, 1).status_code == 404
    assert fragment(client, client_run, 2**40).status_code == 404


def test_hostile_and_huge_states_render_bounded_and_escaped(client, operator, client_run):
    hostile = {f"<script>alert({i})</script>": i for i in range(DIFF_ROWS_SHOWN + 50)}
    hostile["big"] = 2**70
    hostile["long"] = "x" * 100_000
    hostile["a/b~c"] = {"d" * 10: [[[[[[[[[[1]]]]]]]]]]}
    put(operator, client_run, 0, hostile)
    client.force_login(operator)
    page = client.get(reverse("run-detail", args=[client_run.pk]))
    assert page.status_code == 200
    response = fragment(client, client_run, 1)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<script>" not in html
    assert len(_diff_rows(html)) == DIFF_ROWS_SHOWN
    assert "53 more changes not shown." in html
    # Each value is cut in the diff (the whole state follows once, folded).
    assert "x" * 2000 not in html.split('id="agent-state-1"')[0]


def test_earlier_versions_are_paged(client, operator, client_run):
    total = STATE_VERSIONS_SHOWN + 5
    for version in range(total):
        put(operator, client_run, version, {"n": version})
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[client_run.pk])).content.decode()
    shown = re.findall(r'data-state-version="(\d+)"', html)
    assert shown == [str(v) for v in range(total, 5, -1)]
    assert "5 earlier versions" in html
    url = reverse("run-state-versions", args=[client_run.pk])
    earlier = client.get(f"{url}?before=6").content.decode()
    assert re.findall(r'data-state-version="(\d+)"', earlier) == ["5", "4", "3", "2", "1"]
    assert "earlier version" not in earlier
    for bad in ("", "abc", "0", "-1", str(2**40)):
        assert client.get(f"{url}?before={bad}").status_code == 400


def test_a_steps_state_diff_shows_what_the_agent_wrote_for_it(
    client, operator, client_run, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    with django_capture_on_commit_callbacks(execute=True):
        step = step_append(
            actor=actor,
            run_id=client_run.pk,
            tool="get_order",
            args={},
            executor=Executor.CLIENT,
        )
    with django_capture_on_commit_callbacks(execute=True):
        step_report(actor=actor, run_id=client_run.pk, step_id=step.pk, report={"result": 7})
    put(operator, client_run, 0, {"plan": ["look up"]})
    put(operator, client_run, 1, {"plan": ["look up"], "found": 7}, step_index=0)
    client.force_login(operator)
    page = client.get(reverse("run-detail", args=[client_run.pk])).content.decode()
    summary = page[page.index('id="checkpoint-0"') :].split("</summary>")[0]
    assert "the agent wrote its state for it" in summary
    html = client.get(reverse("run-step-state", args=[client_run.pk, 0])).content.decode()
    agent, executor = html.split("The executor's bookkeeping")
    assert "The agent's state" in agent
    assert _diff_rows(agent) == [("added", "/found")]
    assert ("added", "/completed_steps") in _diff_rows(executor)
    assert ("added", "/found") not in _diff_rows(executor)


def test_other_projects_see_no_state_version(client, client_run, operator, seeded):
    put(operator, client_run, 0, {"secret": 1})
    other = Project.objects.create(slug="other", name="Other")
    client.force_login(make_user("otto", Role.OPERATOR, project=other))
    assert fragment(client, client_run, 1).status_code in (403, 404)
    url = reverse("run-state-versions", args=[client_run.pk])
    assert client.get(f"{url}?before=2").status_code in (403, 404)


def test_the_fork_form_starts_from_the_chosen_state_version(
    client, operator, client_run, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    with django_capture_on_commit_callbacks(execute=True):
        step_append(
            actor=actor, run_id=client_run.pk, tool="get_order", args={}, executor=Executor.CLIENT
        )
    put(operator, client_run, 0, {"plan": ["a"]})
    put(operator, client_run, 1, {"plan": ["a", "b"]})
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[client_run.pk])).content.decode()
    assert 'name="state_version" id="fork-state-version" min="0" max="2"' in html
    fork_url = reverse("run-fork", args=[client_run.pk])
    refused = client.post(fork_url, {"from_index": 0, "state_version": "x"}, follow=True)
    assert "not a version" in refused.content.decode()
    assert Run.objects.count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(fork_url, {"from_index": 0, "state_version": "1"})
    fork = Run.objects.exclude(pk=client_run.pk).get()
    assert response["Location"] == f"/runs/{fork.pk}/"
    page = client.get(reverse("run-state-version", args=[fork.pk, 0])).content.decode()
    assert _diff_rows(page) == [("added", "/plan")]
    assert '<span class="j-str">"a"</span>' in page
    assert '<span class="j-str">"b"</span>' not in page
