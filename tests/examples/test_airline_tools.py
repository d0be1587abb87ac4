"""The airline example's own parts: the 14 live tools reproduce every recorded output, a write
acts once per idempotency key (retried, or raced by threads), bad calls get clear errors; the
replay model server answers with the recorded turns and refuses bad requests."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import httpx
import openai
import pytest

from examples.airline import model_server, tools
from examples.airline.replay import recorded_calls, same_output
from examples.airline.store import Store
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA, TRAJECTORIES

CONVERSATIONS = json.loads(TRAJECTORIES.read_text())


@pytest.fixture(scope="module")
def store():
    opened = Store(AIRLINE_DSN, DATA)
    yield opened
    opened.close()


@pytest.fixture
def world(store: Store) -> str:
    name = f"test:{uuid.uuid4().hex}"
    store.create_world(name)
    return name


def test_every_recorded_tool_call_gives_the_recorded_output(store):
    calls = differing = 0
    for conversation in CONVERSATIONS:
        world = f"test:{uuid.uuid4().hex}"
        store.create_world(world)
        for n, (name, args, recorded) in enumerate(recorded_calls(conversation["traj"])):
            got = tools.call(store, world, name, args, idempotency_key=f"call-{n}")
            calls += 1
            differing += not same_output(name, got, recorded)
    assert (calls, differing) == (572, 0)


def _certificates(store: Store, world: str, user: str) -> list[str]:
    methods = store.documents(world)["users"][user]["payment_methods"]
    return sorted(key for key in methods if key.startswith("certificate_"))


def test_a_write_retried_with_its_key_acts_once(store, world):
    args = {"user_id": "mia_li_3668", "amount": 100}
    before = _certificates(store, world, "mia_li_3668")
    first = tools.call(store, world, "send_certificate", args, idempotency_key="k1")
    again = tools.call(store, world, "send_certificate", args, idempotency_key="k1")
    assert (
        first
        == again
        == ("Certificate certificate_3221322 added to user mia_li_3668 with amount 100.")
    )
    assert _certificates(store, world, "mia_li_3668") == sorted([*before, "certificate_3221322"])
    # Another key is another call: a second certificate.
    tools.call(store, world, "send_certificate", args, idempotency_key="k2")
    assert _certificates(store, world, "mia_li_3668") == sorted(
        [*before, "certificate_3221322", "certificate_3221323"]
    )
    assert [key for key, _tool, _out in store.effects(world)] == ["k1", "k2"]


def test_concurrent_calls_with_one_key_act_once(store, world):
    args = {"reservation_id": "4WQ150"}
    outputs: list[str] = []
    start = threading.Barrier(8)

    def cancel() -> None:
        start.wait()
        outputs.append(tools.call(store, world, "cancel_reservation", args, idempotency_key="c"))

    threads = [threading.Thread(target=cancel) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Every caller got the one output (none failed on the race), and it acted once.
    assert len(outputs) == 8
    assert len(set(outputs)) == 1
    history = store.documents(world)["reservations"]["4WQ150"]["payment_history"]
    # One refund per original payment: the cancellation ran once.
    assert sum(1 for payment in history if payment["amount"] < 0) == len(history) // 2
    assert len(store.effects(world)) == 1


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("get_user_details", {"user_id": "nobody"}, "Error: user not found"),
        ("cancel_reservation", {"reservation_id": "ZZZZZZ"}, "Error: reservation not found"),
        (
            "calculate",
            {"expression": "__import__('os')"},
            "Error: invalid characters in expression",
        ),
        ("calculate", {"expression": "1/0"}, "Error: division by zero"),
        ("calculate", {"expression": "(2+3)*4.5"}, "22.5"),
    ],
)
def test_bad_arguments_give_the_tools_error_outputs(store, world, name, args, expected):
    assert tools.call(store, world, name, args, idempotency_key="x") == expected


def test_unknown_tools_and_misfit_arguments_are_refused(store, world):
    with pytest.raises(ValueError, match="unknown airline tool"):
        tools.call(store, world, "drop_tables", {}, idempotency_key="x")
    with pytest.raises(TypeError):
        tools.call(store, world, "get_user_details", {"user": "x"}, idempotency_key="x")
    # A huge power is refused by the evaluator instead of hanging the tool.
    assert tools.call(
        store, world, "calculate", {"expression": "9**9**9**9"}, idempotency_key="x"
    ).startswith("Error:")


@pytest.fixture(scope="module")
def server():
    running = model_server.ReplayServer(TRAJECTORIES)
    yield running
    running.close()


def _request(conversation: dict[str, Any], upto: int) -> list[dict[str, Any]]:
    return [m for m in conversation["traj"][:upto] if m["role"] in ("system", "user")]


def test_the_openai_client_gets_the_recorded_turns(server):
    conversation = CONVERSATIONS[0]
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="replay")
    name = model_server.model_name(conversation["task_id"], conversation["trial"])
    first = client.chat.completions.create(model=name, messages=_request(conversation, 2))
    recorded = next(m for m in conversation["traj"] if m["role"] == "assistant")
    assert first.choices[0].message.content == recorded["content"]
    assert first.usage is not None
    assert first.usage.prompt_tokens > 0
    names = {model.id for model in client.models.list()}
    assert len(names) == len(CONVERSATIONS)


def test_the_model_server_refuses_bad_requests_and_keeps_serving(server):
    name = model_server.model_name(CONVERSATIONS[0]["task_id"], CONVERSATIONS[0]["trial"])
    url = f"{server.url}/v1/chat/completions"
    unknown = httpx.post(url, json={"model": "tau-bench/999/9", "messages": []})
    streamed = httpx.post(url, json={"model": name, "messages": [], "stream": True})
    garbage = httpx.post(url, content=b"{not json")
    # Every recorded turn already answered, and the last message no tool's result: no more.
    answered = model_server.load_turns(TRAJECTORIES)[name]
    messages = [
        {"role": "assistant", **{k: t[k] for k in ("content", "tool_calls") if t.get(k)}}
        for t in answered
    ]
    too_far = httpx.post(url, json={"model": name, "messages": messages})
    assert [r.status_code for r in (unknown, streamed, garbage, too_far)] == [404, 400, 400, 400]
    assert "turn" in too_far.json()["error"]["message"]
    assert httpx.post(url, json={"model": name, "messages": []}).status_code == 200
