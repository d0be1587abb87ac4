"""A rejected run turned into a case (through the API) fails an agent version that repeats
the rejected call and passes one that does not; the reviewer's comment is the reason."""

from __future__ import annotations

import pytest
from agentops_client.evals import replay_case

from agentops.actors import Actor
from evals.models import EvalRun
from evals.services import case_set_create, eval_run_record
from projects.services import project_default
from testsupport.factories import EMAIL_ARGS, make_token, run_awaiting_approval, token_api

pytestmark = pytest.mark.django_db


def _repeats(replay):
    replay.call_tool("send_email", dict(EMAIL_ARGS))
    return "sent"


def _asks_first(replay):
    replay.call_tool("send_email", {**EMAIL_ARGS, "subject": "Your refund, once approved"})
    return "asked"


def test_a_rejected_run_fails_the_agent_that_repeats_the_call(operator, rejected_run):
    run = rejected_run("never promise a refund before finance approves it")
    case_set = case_set_create(
        project_id=project_default().pk, name="rejections", actor=Actor.for_user(operator)
    )
    api = token_api(make_token(operator))
    made = api.post(
        f"/api/v1/evals/case-sets/{case_set.pk}/cases/",
        {"run": str(run.pk), "step_index": 0, "expect": "rejected"},
        format="json",
    )
    assert made.status_code == 201, made.content
    case = made.json()
    assert case["expected"] == {
        "kind": "must_not",
        "tool": "send_email",
        "args": EMAIL_ARGS,
        "reason": "never promise a refund before finance approves it",
    }
    assert "send_email" in case["write_tools"]

    actor = Actor.for_user(operator)
    failing = eval_run_record(
        case_set_id=case_set.pk,
        version=None,
        agent_version="repeats",
        outcomes=[replay_case(case, _repeats)],
        actor=actor,
    )
    passing = eval_run_record(
        case_set_id=case_set.pk,
        version=None,
        agent_version="asks first",
        outcomes=[replay_case(case, _asks_first)],
        actor=actor,
    )
    assert (failing.passed, failing.total) == (0, 1)
    reason = failing.results.get().reason
    assert "repeats the rejected send_email" in reason
    assert "finance approves" in reason
    assert failing.results.get().made == [
        {"tool": "send_email", "args": EMAIL_ARGS, "sandboxed": True}
    ]
    assert (passing.passed, passing.total) == (1, 1)


def test_a_step_that_was_not_rejected_is_no_rejection_case(
    operator, django_capture_on_commit_callbacks
):
    run = run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks)
    case_set = case_set_create(
        project_id=project_default().pk, name="rejections", actor=Actor.for_user(operator)
    )
    answer = token_api(make_token(operator)).post(
        f"/api/v1/evals/case-sets/{case_set.pk}/cases/",
        {"run": str(run.pk), "step_index": 0, "expect": "rejected"},
        format="json",
    )
    assert answer.status_code == 400
    assert "was not rejected" in answer.json()["detail"]
    case_set.refresh_from_db()
    assert case_set.version == 0
    assert not case_set.cases.exists()
    assert not EvalRun.objects.exists()
