"""Reading a run's conversation over the API: the τ-bench conversations go in as OpenAI chat
messages and come out unchanged, the latest messages page back, bad queries are 400s, and
only the run's project sees them."""

from __future__ import annotations

import json

import pytest
from rest_framework.throttling import SimpleRateThrottle

from projects.models import Project
from projects.roles import Role
from tests.api.conftest import RUNS_URL, run_url, token_client
from tests.conftest import DATA_DIR
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db

TRAJECTORIES = DATA_DIR / "trajectories.json"
# What one report may hold (runs.control.conversation.MAX_MESSAGES).
REPORT = 200


def client_run(api) -> str:
    response = api.post(RUNS_URL, {"agent": "client", "goal": "talk"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def append(api, run_id: str, messages: list[dict]) -> None:
    for start in range(0, len(messages), REPORT):
        chunk = messages[start : start + REPORT]
        response = api.post(run_url(run_id, "messages"), {"messages": chunk}, format="json")
        assert response.status_code == 201, response.content


def test_tau_bench_conversations_round_trip_unchanged(operator, monkeypatch):
    # 400 requests from one user as fast as the test goes: past the API's 200 a second.
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "user", "100000/s")
    api = token_client(operator)
    conversations = json.loads(TRAJECTORIES.read_text())
    assert len(conversations) == 100
    for conversation in conversations:
        traj = conversation["traj"]
        run_id = client_run(api)
        append(api, run_id, traj)
        page = api.get(run_url(run_id, "messages"), {"last": 1000}).json()
        assert [m["message"] for m in page["messages"]] == traj
        assert [m["position"] for m in page["messages"]] == list(range(len(traj)))
        assert page["message_count"] == len(traj)
        assert api.get(run_url(run_id)).json()["conversation"] == traj


def test_the_latest_messages_page_back_to_the_first(operator):
    api = token_client(operator)
    run_id = client_run(api)
    append(api, run_id, [{"role": "user", "content": str(i)} for i in range(7)])
    page = api.get(run_url(run_id, "messages"), {"last": 3}).json()
    assert [m["message"]["content"] for m in page["messages"]] == ["4", "5", "6"]
    before = page["messages"][0]["position"]
    page = api.get(run_url(run_id, "messages"), {"last": 3, "before": before}).json()
    assert [m["message"]["content"] for m in page["messages"]] == ["1", "2", "3"]
    page = api.get(run_url(run_id, "messages"), {"last": 3, "before": 1}).json()
    assert [m["message"]["content"] for m in page["messages"]] == ["0"]
    assert page["message_count"] == 7


@pytest.mark.parametrize(
    "query",
    [{"last": 0}, {"last": 1001}, {"last": "x"}, {"before": -1}, {"before": "1.5"}],
)
def test_a_bad_query_is_a_400(operator, query):
    api = token_client(operator)
    run_id = client_run(api)
    response = api.get(run_url(run_id, "messages"), query)
    assert response.status_code == 400


def test_viewers_read_and_other_projects_see_nothing(operator):
    api = token_client(operator)
    run_id = client_run(api)
    append(api, run_id, [{"role": "user", "content": "hello"}])
    viewer = token_client(make_user("vera", Role.VIEWER))
    assert viewer.get(run_url(run_id, "messages")).status_code == 200
    assert viewer.get(run_url(run_id, "context")).status_code == 200
    refused = viewer.post(
        run_url(run_id, "messages"), {"messages": [{"role": "user", "content": "x"}]}, format="json"
    )
    assert refused.status_code == 403
    other = Project.objects.create(slug="other", name="Other")
    outsider = token_client(make_user("otto", Role.OPERATOR, project=other), other)
    for action in ("messages", "context"):
        assert outsider.get(run_url(run_id, action)).status_code == 404
    assert outsider.post(run_url(run_id, "compact"), {}, format="json").status_code == 404
    assert api.get(run_url(run_id, "messages")).json()["message_count"] == 1
