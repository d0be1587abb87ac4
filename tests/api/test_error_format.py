"""Every refusal of the API has one body, ``{"detail": str, "field": str}``: a serializer's or
a filter's errors, a bad query parameter and a path no route matches too; and only JSON
bodies are read."""

from __future__ import annotations

import uuid

import pytest

from tests.api.conftest import RUNS_URL, calc, plan_body, post_run, token_client
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"agent": "plan", "goal": ""}, "goal", "goal: This field may not be blank."),
        (plan_body({"tool": "", "args": {}}), "steps[0].tool", "steps[0].tool: "),
        (
            {"agent": "plan", "goal": "g", "colour": "red", "steps": [calc()]},
            "colour",
            "colour: unknown field",
        ),
        ({"agent": "plan", "goal": "g", "step_limit": 0}, "step_limit", "step_limit: "),
        ({"agent": "plan", "goal": "g", "transcript": [1]}, "transcript[0]", "transcript[0]: "),
        ({"agent": "plan", "goal": "g", "metadata": {"a": 1}, "budget": 3}, "budget", "budget: "),
    ],
)
def test_a_serializers_errors_are_one_detail_naming_the_field(operator_api, body, field, words):
    with assert_unchanged():
        response = post_run(operator_api, **body)
    assert response.status_code == 400
    assert response.json() == {"detail": response.json()["detail"], "field": field}
    assert words in response.json()["detail"]


def test_several_errors_are_all_in_the_detail(operator_api):
    response = post_run(operator_api, agent="robot", goal="")
    assert response.status_code == 400
    assert response.json()["field"] == "agent"
    assert "agent: " in response.json()["detail"]
    assert "; goal: " in response.json()["detail"]


@pytest.mark.parametrize(
    ("url", "query", "field"),
    [
        (RUNS_URL, {"status": "sleeping"}, "status"),
        (RUNS_URL, {"agent": ""}, "agent"),
        (RUNS_URL, {"status": ""}, "status"),
        ("/api/v1/approvals/", {"status": ""}, "status"),
        (RUNS_URL, {"page_size": "0"}, "page_size"),
        (RUNS_URL, {"page_size": "201"}, "page_size"),
        (RUNS_URL, {"page_size": "null"}, "page_size"),
        ("/api/v1/approvals/", {"page_size": "-1"}, "page_size"),
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(operator_reviewer, url, query, field):
    response = token_client(operator_reviewer).get(url, query)
    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs/null/",
        "/api/v1/runs/not-a-uuid/cancel/",
        # A fixed id: test ids must be the same in every pytest-xdist worker.
        f"/api/v1/runs/{uuid.UUID('00000000-0000-4000-8000-000000000001')}/steps/null,null/",
        "/api/v1/approvals/abc/",
        "/api/v1/nothing-here/",
    ],
)
def test_a_path_no_route_matches_is_a_json_404(operator_api, path):
    response = operator_api.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "not found"}


def test_pages_keep_their_html_404(client, operator):
    client.force_login(operator)
    response = client.get("/runs/not-a-uuid/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_a_body_that_is_not_json_is_a_415(operator_api):
    with assert_unchanged():
        response = operator_api.post(
            RUNS_URL, {"agent": "plan", "goal": "g\x00"}, format="multipart"
        )
    assert response.status_code == 415
    assert "detail" in response.json()


def test_a_bad_idempotency_key_is_one_detail_naming_the_header(operator_api):
    with assert_unchanged():
        response = operator_api.post("/api/v1/runs/", {}, HTTP_IDEMPOTENCY_KEY="é")
    assert response.status_code == 400
    assert response.json()["field"] == "Idempotency-Key"
