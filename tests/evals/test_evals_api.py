"""The evals API: cases from a run's step with an operator's expected call (a condition of
the rule language), JSON Lines export, an eval run posted by CI (below its threshold), bad
input refused with nothing changed, and project isolation."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agentops.actors import Actor
from evals.models import Case, CaseSet, EvalRun
from evals.services import case_set_create
from projects.models import Project
from projects.roles import Role
from projects.services import project_default
from testsupport.factories import make_token, make_user, plan_run, token_api

pytestmark = pytest.mark.django_db

ECHO = [{"tool": "echo", "args": {"value": 120}}]


@pytest.fixture
def case_set(operator):
    return case_set_create(
        project_id=project_default().pk, name="regressions", actor=Actor.for_user(operator)
    )


@pytest.fixture
def api(operator):
    return token_api(make_token(operator))


def _case(api, case_set, run, **body):
    return api.post(
        f"/api/v1/evals/case-sets/{case_set.pk}/cases/",
        {"run": str(run.pk), "step_index": 0, **body},
        format="json",
    )


def _outcome(case_id, *calls):
    return {"case": case_id, "calls": list(calls), "final": "", "error": ""}


def test_an_operator_condition_case_scores_calls_and_exports_as_json_lines(
    operator, case_set, api, django_capture_on_commit_callbacks
):
    run = plan_run(operator, ECHO, capture=django_capture_on_commit_callbacks)
    made = _case(
        api,
        case_set,
        run,
        expect="operator",
        calls=[{"tool": "echo", "condition": "value <= 100"}],
    )
    assert made.status_code == 201, made.content
    recorded = _case(api, case_set, run, expect="recorded")
    assert recorded.json()["expected"]["calls"] == ECHO
    assert recorded.json()["tool_results"][0]["args"] == ECHO[0]["args"]
    cases = api.get(f"/api/v1/evals/case-sets/{case_set.pk}/cases/").json()
    assert cases["version"] == 2

    exported = api.get(f"/api/v1/evals/case-sets/{case_set.pk}/export/")
    assert exported["Content-Type"] == "application/jsonl"
    lines = [json.loads(line) for line in exported.content.decode().splitlines()]
    assert [line["id"] for line in lines] == [c["id"] for c in cases["cases"]]

    first, second = (c["id"] for c in cases["cases"])
    call = {"tool": "echo", "args": {"value": 120}}
    answer = api.post(
        "/api/v1/evals/runs/",
        {
            "case_set": case_set.pk,
            "agent_version": "v2",
            "threshold": 0.9,
            "outcomes": [_outcome(first, call), _outcome(second, call)],
        },
        format="json",
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["passed"], body["total"], body["below_threshold"]) == (1, 2, True)
    failed = next(r for r in body["results"] if not r["passed"])
    assert failed["case"] == first
    assert "value <= 100" in failed["reason"]
    assert failed["expected"] == [{"tool": "echo", "condition": "value <= 100"}]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expect": "operator", "calls": [{"tool": "echo", "condition": "__import__('os')"}]}, ""),
        ({"expect": "operator", "calls": [{"tool": "echo"}]}, ""),
        ({"expect": "recorded", "step_index": 9}, "step_index"),
        ({"expect": "sometimes"}, "expect"),
    ],
)
def test_bad_cases_are_refused_and_nothing_changes(
    operator, case_set, api, django_capture_on_commit_callbacks, body, field
):
    run = plan_run(operator, ECHO, capture=django_capture_on_commit_callbacks)
    answer = _case(api, case_set, run, **body)
    assert answer.status_code == 400, answer.content
    case_set.refresh_from_db()
    assert case_set.version == 0
    assert not Case.objects.exists()


def test_an_eval_run_must_give_every_case_an_outcome(
    operator, case_set, api, django_capture_on_commit_callbacks
):
    run = plan_run(operator, ECHO, capture=django_capture_on_commit_callbacks)
    case_id = _case(api, case_set, run, expect="recorded").json()["id"]
    for outcomes in ([], [_outcome(case_id), _outcome(case_id)], [_outcome(case_id + 1)]):
        answer = api.post(
            "/api/v1/evals/runs/",
            {"case_set": case_set.pk, "agent_version": "v2", "outcomes": outcomes},
            format="json",
        )
        assert answer.status_code == 400, answer.content
    assert not EvalRun.objects.exists()


def test_another_projects_user_neither_reads_nor_changes_a_case_set(
    operator, case_set, api, django_capture_on_commit_callbacks
):
    run = plan_run(operator, ECHO, capture=django_capture_on_commit_callbacks)
    case_id = _case(api, case_set, run, expect="recorded").json()["id"]
    eval_run = api.post(
        "/api/v1/evals/runs/",
        {
            "case_set": case_set.pk,
            "agent_version": "v1",
            "outcomes": [_outcome(case_id, ECHO[0])],
        },
        format="json",
    ).json()
    other = Project.objects.create(slug="other", name="Other")
    outsider = make_user("oscar", Role.ADMIN, project=other)
    theirs = token_api(make_token(outsider, project=other))
    assert theirs.get("/api/v1/evals/case-sets/").json() == []
    base = f"/api/v1/evals/case-sets/{case_set.pk}"
    assert theirs.get(f"{base}/cases/").status_code == 404
    assert theirs.get(f"{base}/export/").status_code == 404
    assert theirs.get(f"/api/v1/evals/runs/{eval_run['id']}/").status_code == 404
    assert _case(theirs, case_set, run, expect="recorded").status_code == 404
    posted = theirs.post(
        "/api/v1/evals/runs/",
        {"case_set": case_set.pk, "agent_version": "x", "outcomes": [_outcome(case_id)]},
        format="json",
    )
    assert posted.status_code == 404
    # Their own set may not take a run of another project.
    mine = case_set_create(project_id=other.pk, name="theirs", actor=Actor.for_user(outsider))
    assert _case(theirs, mine, run, expect="recorded").status_code == 404
    assert Case.objects.count() == 1
    assert EvalRun.objects.count() == 1
    assert CaseSet.objects.get(pk=case_set.pk).version == 1
    client = Client()
    client.force_login(outsider)
    assert client.get(f"/evals/case-sets/{case_set.pk}/").status_code == 404
    assert client.get(f"/evals/runs/{eval_run['id']}/").status_code == 404
    assert client.get(f"/runs/{run.pk}/case/").status_code == 404


def test_a_removed_case_stays_in_the_versions_before(
    operator, case_set, api, django_capture_on_commit_callbacks
):
    run = plan_run(operator, ECHO, capture=django_capture_on_commit_callbacks)
    kept = _case(api, case_set, run, expect="recorded").json()["id"]
    gone = _case(api, case_set, run, expect="recorded").json()["id"]
    answer = api.delete(f"/api/v1/evals/cases/{gone}/")
    assert answer.status_code == 200, answer.content
    assert answer.json()["version"] == 3
    assert api.delete(f"/api/v1/evals/cases/{gone}/").status_code == 404
    current = api.get(f"/api/v1/evals/case-sets/{case_set.pk}/cases/").json()
    assert [c["id"] for c in current["cases"]] == [kept]

    def record(version, *ids):
        return api.post(
            "/api/v1/evals/runs/",
            {
                "case_set": case_set.pk,
                "version": version,
                "agent_version": "v1",
                "outcomes": [_outcome(i, ECHO[0]) for i in ids],
            },
            format="json",
        )

    # Version 2 holds both cases, version 3 the kept one alone.
    assert record(2, kept).status_code == 400
    assert record(3, kept, gone).status_code == 400
    assert record(4, kept).status_code == 400
    assert record(2, kept, gone).json()["total"] == 2
    assert record(3, kept).json()["total"] == 1


def test_the_final_answer_counts_when_the_case_says_what_it_must_contain(
    operator, case_set, api, django_capture_on_commit_callbacks
):
    run = plan_run(operator, ECHO, capture=django_capture_on_commit_callbacks)
    made = _case(api, case_set, run, expect="recorded", final_contains="Refunded")
    assert made.status_code == 201, made.content
    case_id = made.json()["id"]
    assert made.json()["expected"]["final_contains"] == "Refunded"

    def record(final):
        outcome = {**_outcome(case_id, ECHO[0]), "final": final}
        return api.post(
            "/api/v1/evals/runs/",
            {"case_set": case_set.pk, "agent_version": final, "outcomes": [outcome]},
            format="json",
        ).json()

    said = record("I refunded order 7.")
    silent = record("Done.")
    assert (said["passed"], silent["passed"]) == (1, 0)
    assert "does not contain 'Refunded'" in silent["results"][0]["reason"]
