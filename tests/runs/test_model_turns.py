"""A client run's model turns: messages appended to its conversation, the usage of each model
call and of each step added to the run's totals, bad reports refused without a trace."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from runs.control.conversation import run_messages_append
from runs.control.create import run_create, step_append
from runs.control.lifecycle import run_cancel, run_complete
from runs.models import ModelCall, RetentionPolicy, Run
from runs.retention import retention_purge
from runs.selectors import run_conversation
from tests.api.conftest import run_url, token_client
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

TURN = [
    {"role": "user", "content": "What is 6 times 7?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "calculate", "arguments": '{"expression": "6*7"}'},
            }
        ],
    },
]
USAGE = {
    "model": "gpt-4o",
    "input_tokens": 1200,
    "output_tokens": 80,
    "cost_usd": 0.0038,
    "latency_ms": 950,
}


@pytest.fixture
def client_run(operator, django_capture_on_commit_callbacks) -> Run:
    return make_run(
        operator, agent="client", goal="multiply", capture=django_capture_on_commit_callbacks
    )


def test_a_turn_appends_messages_and_adds_its_usage(
    client_run, operator, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator, via_api=True)
    run_messages_append(actor=actor, run_id=client_run.pk, messages=TURN, usage=USAGE)
    with django_capture_on_commit_callbacks(execute=True):
        step_append(
            actor=actor,
            run_id=client_run.pk,
            tool="calculate",
            args={"expression": "6*7"},
            usage={"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.0002},
        )
    run_messages_append(
        actor=actor,
        run_id=client_run.pk,
        messages=[{"role": "tool", "tool_call_id": "call_1", "content": "42"}],
        usage={"model": "gpt-4o", "input_tokens": 1300, "output_tokens": 20, "cost_usd": 0.004},
    )
    run = Run.objects.get(pk=client_run.pk)
    assert run_conversation(run_id=run.pk) == [
        *TURN,
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    ]
    assert run.usage_tokens == 1200 + 80 + 10 + 5 + 1300 + 20
    assert run.cost_usd == Decimal("0.0038") + Decimal("0.0002") + Decimal("0.004")
    assert run.steps.get().usage == {
        "model": "",
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_usd": 0.0002,
        "latency_ms": 0,
    }
    calls = list(ModelCall.objects.filter(run=run).values_list("first_message", "messages"))
    assert calls == [(0, 2), (2, 1)]
    assert ModelCall.objects.filter(run=run).first().latency_ms == 950


@pytest.mark.parametrize(
    ("messages", "usage", "words"),
    [
        ([], None, "list of 1"),
        ([{"role": "robot", "content": "x"}], None, "role"),
        ([{"role": "user", "content": 5}], None, "content"),
        ([{"role": "user", "content": "x", "secret": 1}], None, "unknown keys"),
        (TURN, {"model": "m", "input_tokens": -1}, "input_tokens"),
        (TURN, {"model": "m", "output_tokens": 10**13}, "output_tokens"),
        (TURN, {"model": "m", "cost_usd": float("nan")}, "cost_usd"),
        (TURN, {"model": "m", "cost_usd": True}, "cost_usd"),
        (TURN, {"input_tokens": 1}, "model"),
        (TURN, {"model": "m", "tokens": 1}, "unknown keys"),
        (TURN, [1], "object"),
    ],
)
def test_bad_reports_are_refused_and_change_nothing(client_run, operator, messages, usage, words):
    with assert_unchanged(), pytest.raises(InvalidInput, match=words):
        run_messages_append(
            actor=Actor.for_user(operator), run_id=client_run.pk, messages=messages, usage=usage
        )


def test_only_an_active_client_run_takes_turns(
    client_run, operator, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator)
    with django_capture_on_commit_callbacks(execute=True):
        plan = run_create(
            actor=actor, agent="plan", goal="p", steps=[{"tool": "echo", "args": {"value": 1}}]
        )
    with assert_unchanged(), pytest.raises(InvalidInput, match="client runs"):
        run_messages_append(actor=actor, run_id=plan.pk, messages=TURN)
    with django_capture_on_commit_callbacks(execute=True):
        run_complete(run_id=client_run.pk, actor=actor)
    with assert_unchanged(), pytest.raises(Conflict):
        run_messages_append(actor=actor, run_id=client_run.pk, messages=TURN)


def test_the_api_takes_a_turn_and_shows_the_totals(client_run, operator):
    client = token_client(operator)
    response = client.post(
        run_url(client_run.pk, "messages"), {"messages": TURN, "usage": USAGE}, format="json"
    )
    assert response.status_code == 201
    data = response.json()
    assert (data["usage_tokens"], data["cost_usd"]) == (1280, 0.0038)
    # The answer is the run's totals; the conversation is read from the run.
    assert "conversation" not in data
    assert client.get(run_url(client_run.pk)).json()["conversation"] == TURN
    bad = client.post(run_url(client_run.pk, "messages"), {"messages": "hi"}, format="json")
    assert bad.status_code == 400


def test_the_run_page_shows_each_steps_usage(
    client, client_run, operator, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        step_append(
            actor=Actor.for_user(operator),
            run_id=client_run.pk,
            tool="echo",
            args={"value": 1},
            usage={"input_tokens": 30, "output_tokens": 12, "cost_usd": 0.0021},
        )
    client.force_login(operator)
    html = client.get(f"/runs/{client_run.pk}/").content.decode()
    assert "42 tokens, $0.0021" in html


def test_retention_deletes_a_runs_model_calls_with_it(client_run, operator):
    actor = Actor.for_user(operator)
    run_messages_append(actor=actor, run_id=client_run.pk, messages=TURN, usage=USAGE)
    run_cancel(run_id=client_run.pk, actor=actor)
    RetentionPolicy.objects.create(name="all", ttl_days=0)
    retention_purge(actor=Actor.system("retention"), now=timezone.now() + timedelta(seconds=1))
    assert not Run.objects.filter(pk=client_run.pk).exists()
    assert not ModelCall.objects.exists()
