"""Grants through the REST API: a run created with a grant, and a token's grant, bound the
run's calls (a call outside them answers 201 with the step ``refused``); a malformed grant is
a 400 naming it, with nothing created."""

from __future__ import annotations

import pytest

from runs.models import Run
from tests.api.conftest import post_run, run_url
from testsupport.factories import make_token, token_api
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def test_a_client_runs_call_outside_its_and_its_tokens_grants_is_refused(operator):
    api = token_api(make_token(operator, grant={"tools": ["calculate", "send_email"]}))
    created = post_run(api, agent="client", goal="g", grant={"tools": ["calculate", "echo"]})
    assert created.status_code == 201, created.content
    run_id = created.json()["id"]
    assert [g["source"] for g in Run.objects.get(pk=run_id).grants] == ["run", "token"]
    steps = run_url(run_id, "steps")
    not_the_tokens = api.post(steps, {"tool": "echo", "args": {"value": 1}}, format="json")
    allowed = api.post(steps, {"tool": "calculate", "args": {"expression": "1"}}, format="json")
    assert allowed.json()["status"] == "queued"  # granted: on its way to the workers
    refused = not_the_tokens.json()
    assert (refused["status"], refused["error"]["type"]) == ("refused", "not_granted")
    assert refused["error"]["grant"] == "token"


@pytest.mark.parametrize("grant", [{"tools": "echo"}, {"tools": ["echo"], "constraints": []}])
def test_a_malformed_grant_is_a_400_naming_it(operator_api, grant):
    with assert_unchanged():
        response = post_run(operator_api, agent="client", goal="g", grant=grant)
    assert response.status_code == 400
    assert "grant" in response.content.decode()
