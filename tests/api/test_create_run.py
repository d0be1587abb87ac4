"""POST /api/v1/runs/ creates plan, client and transcript runs and rejects bad input with 400."""

import pytest

from agentops.actors import ActorKind
from audit.models import AuditEvent
from runs.models import Run, RunStatus
from tests.api.conftest import calc, email_step, plan_body, post_run, run_url
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

TRANSCRIPT = [
    {"role": "user", "content": "what is 6 times 7?"},
    {
        "role": "assistant",
        "content": "Let me compute that.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "calculate", "arguments": '{"expression": "6*7"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    {"role": "assistant", "content": "It is 42."},
]


def test_plan_run_is_created_queued_with_its_steps(operator_api, operator):
    body = plan_body(calc("2+3"), {**calc("4*5"), "rationale": "double check"}, goal="add")
    body["metadata"] = {"ticket": "T-1"}
    response = post_run(operator_api, **body)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["status"] == RunStatus.QUEUED
    assert data["agent"] == "plan"
    assert data["goal"] == "add"
    assert data["requested_by"] == operator.username
    assert data["metadata"] == {"ticket": "T-1"}
    assert data["error"] is None
    assert [s["tool"] for s in data["steps"]] == ["calculate", "calculate"]
    step = data["steps"][1]
    assert step["index"] == 1
    assert step["args"] == {"expression": "4*5"}
    assert step["rationale"] == "double check"
    assert step["risk"] == "low"
    assert step["status"] == "pending"
    assert step["approval"] is None
    assert step["attempt_history"] == []
    assert step["idempotency_key"].startswith(f"{data['id']}:1:calculate:")
    assert Run.objects.filter(pk=data["id"]).exists()


def test_token_request_is_recorded_as_an_api_client(operator_api):
    data = post_run(operator_api, **plan_body(calc())).json()
    created = AuditEvent.objects.get(run_id=data["id"], verb="run.created")
    assert created.actor_kind == ActorKind.API_CLIENT


def test_created_run_runs_to_success_after_commit(operator_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        data = post_run(operator_api, **plan_body(calc("2+3"))).json()
    run = operator_api.get(f"/api/v1/runs/{data['id']}/").json()
    assert run["status"] == RunStatus.SUCCEEDED
    assert run["steps"][0]["result"] == 5.0
    assert run["steps"][0]["attempts"] == 1


def test_client_run_is_created_without_steps(operator_api):
    response = post_run(operator_api, agent="client", goal="drive me")
    assert response.status_code == 201, response.json()
    assert response.json()["agent"] == "client"
    assert response.json()["steps"] == []


def test_transcript_run_turns_tool_calls_into_steps(operator_api):
    response = post_run(operator_api, agent="transcript", goal="replay", transcript=TRANSCRIPT)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert [(s["tool"], s["args"]) for s in data["steps"]] == [("calculate", {"expression": "6*7"})]
    assert data["steps"][0]["rationale"] == "Let me compute that."
    assert [m["role"] for m in data["conversation"]] == ["user", "assistant", "assistant"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"agent": "robot", "goal": "x", "steps": [calc()]}, "agent", "robot"),
        ({"agent": "plan", "goal": "x", "steps": [{"tool": "nope"}]}, "steps[0].tool", "nope"),
        (
            {"agent": "plan", "goal": "x", "steps": [{"tool": "calculate", "args": {}}]},
            "steps[0].args",
            "expression",
        ),
        (
            {"agent": "plan", "goal": "x", "steps": [{"tool": "calculate", "args": {"e": 1}}]},
            "steps[0].args",
            "expression",
        ),
        ({"agent": "plan", "goal": "x"}, "steps", "at least one step"),
        ({"agent": "plan", "goal": "  ", "steps": [calc()]}, "goal", "blank"),
        ({"agent": "transcript", "goal": "x"}, "transcript", "transcript"),
        (
            {"agent": "transcript", "goal": "x", "transcript": [{"role": "robot"}]},
            "transcript[0]",
            "role",
        ),
        (
            {"agent": "transcript", "goal": "x", "transcript": TRANSCRIPT[:2]},
            "transcript[1].tool_calls[0]",
            "no recorded tool message",
        ),
        ({"agent": "plan", "goal": "x", "steps": [calc()], "metadata": [1]}, "metadata", ""),
        ({"agent": "plan", "goal": "x", "steps": [calc()], "colour": "red"}, "colour", ""),
        (
            {"agent": "plan", "goal": "x", "steps": [{**calc(), "why": "?"}]},
            "steps[0].why",
            "unknown field",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_field(operator_api, body, field, words):
    with assert_unchanged():
        response = operator_api.post("/api/v1/runs/", body, format="json")
        assert response.status_code == 400
    # A domain error from the service and a shape error from the input serializer alike.
    data = response.json()
    assert data["field"] == field
    assert words in data["detail"]
    assert not Run.objects.exists()


def _transcript_calling(name: str, call_id: str = "call_1") -> list[dict[str, object]]:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "done"},
    ]


@pytest.mark.parametrize(
    ("transcript", "field", "words"),
    [
        ([{"role": "assistant", "content": "", "tool_calls": 5}], "transcript[0]", "list"),
        (_transcript_calling("t" * 129), "transcript[0].tool_calls[0]", "128"),
        (_transcript_calling("lookup", "c" * 129), "transcript[0].tool_calls[0]", "128"),
        (_transcript_calling(""), "transcript[0].tool_calls[0]", "function.name"),
    ],
)
def test_transcript_tool_calls_beyond_what_a_step_holds_are_a_400(
    operator_api, transcript, field, words
):
    with assert_unchanged():
        response = post_run(operator_api, agent="transcript", goal="replay", transcript=transcript)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert words in response.json()["detail"]


def test_args_failing_the_schema_say_which_argument(operator_api):
    body = plan_body({"tool": "calculate", "args": {"expression": 5}})
    data = post_run(operator_api, **body).json()
    assert data["field"] == "steps[0].args"
    assert data["detail"].startswith("steps[0].args: expression:")


def test_body_that_is_not_an_object_is_a_400(operator_api):
    with assert_unchanged():
        response = operator_api.post("/api/v1/runs/", [1, 2], format="json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        {
            **plan_body(calc("2+3"), email_step(), goal="answer"),
            "metadata": {"ticket": "T-2"},
            "budget": {"max_tokens": 1000},
        },
        {"agent": "client", "goal": "bring your own agent", "steps": [calc("1+1")]},
        {"agent": "transcript", "goal": "replay", "transcript": TRANSCRIPT},
    ],
    ids=["plan", "client", "transcript"],
)
def test_the_created_run_answered_is_the_run_stored(operator_api, body):
    """The 201 answer is built from what the creation made, not read back: it must be exactly
    what reading the run from the database gives (the run has not started: this test's
    transaction never commits, so no wake-up goes out)."""
    created = post_run(operator_api, **body)
    assert created.status_code == 201, created.json()
    stored = operator_api.get(run_url(created.json()["id"]))
    assert stored.status_code == 200
    assert created.json() == stored.json()
    assert created.json()["steps"]
