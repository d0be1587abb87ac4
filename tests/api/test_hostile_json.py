"""Hostile JSON (NUL, unpaired surrogates, absurd nesting) is refused with a 400 that says
where, on every endpoint that takes JSON, and changes nothing."""

from __future__ import annotations

import pytest

from tests.api.conftest import RUNS_URL, run_url, token_client
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

HOSTILE = [
    ('{"tool": "get_x", "args": {"x": "a\\u0000b"}, "executor": "client"}', "body.args.x", "NUL"),
    (
        '{"tool": "get_x", "args": {"\\ud800": 1}, "executor": "client"}',
        "body.args key",
        "surrogates",
    ),
    (
        '{"tool": "get_x", "args": {"x": "\\udfff"}, "executor": "client"}',
        "body.args.x",
        "surrogates",
    ),
    (
        '{"tool": "get_x", "executor": "client", "args": {"x": ' + "[" * 100 + "]" * 100 + "}}",
        "nested deeper",
        "64",
    ),
    ('{"tool": "get_x", "args": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested deeper", "64"),
]


@pytest.fixture
def client_run(operator, django_capture_on_commit_callbacks):
    return make_run(
        operator, agent="client", goal="hostile", capture=django_capture_on_commit_callbacks
    )


@pytest.mark.parametrize(("body", "where", "why"), HOSTILE)
def test_hostile_json_is_refused_where_it_is(operator, client_run, body, where, why):
    api = token_client(operator)
    with assert_unchanged():
        response = api.post(run_url(client_run.pk, "steps"), body, content_type="application/json")
    assert response.status_code == 400
    assert where in response.json()["detail"]
    assert why in response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("", '{"agent": "client", "goal": "g\\u0000"}'),
        ("messages", '{"messages": [{"role": "user", "content": "\\ud83d"}]}'),
        ("cancel", '{"reason": "\\u0000"}'),
    ],
)
def test_every_json_endpoint_refuses_it(operator, client_run, path, body):
    api = token_client(operator)
    url = run_url(client_run.pk, path) if path else RUNS_URL
    with assert_unchanged():
        response = api.post(url, body, content_type="application/json")
    assert response.status_code == 400, response.content


def test_a_client_steps_result_with_nul_is_refused(
    operator, client_run, django_capture_on_commit_callbacks
):
    api = token_client(operator)
    with django_capture_on_commit_callbacks(execute=True):
        step = api.post(
            run_url(client_run.pk, "steps"),
            {"tool": "get_x", "args": {}, "executor": "client"},
            format="json",
        ).json()
    with assert_unchanged():
        response = api.post(
            run_url(client_run.pk, f"steps/{step['id']}/result"),
            '{"result": {"text": "\\u0000"}}',
            content_type="application/json",
        )
    assert response.status_code == 400
    assert "body.result.text" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"agent": "client", "goal": "g", "metadata": {"n": 1e999}}', "finite"),
        ('{"agent": "client", "goal": "g", "metadata": {"n": -1e999}}', "finite"),
        ('{"agent": "client", "goal": "g", "step_limit": 2147483648}', "step_limit"),
        ('{"agent": "client", "goal": "g", "budget": {"max_cost_usd": 1e999}}', "finite"),
    ],
)
def test_numbers_out_of_range_are_refused(operator, body, words):
    api = token_client(operator)
    with assert_unchanged():
        response = api.post(RUNS_URL, body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert words in response.content.decode()


def test_an_event_cursor_out_of_range_is_refused(operator, client_run):
    api = token_client(operator)
    response = api.get(run_url(client_run.pk, "events"), {"after": 2**64})
    assert response.status_code == 400
    assert response.json()["field"] == "after"
