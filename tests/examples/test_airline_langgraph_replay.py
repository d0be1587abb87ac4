"""Twenty τ-bench airline conversations replayed by the LangGraph agent of the airline example
(``examples.airline.langgraph_replay``: ``ChatOpenAI`` on the replay model server, the
airline tools in ``governed_tool_node``, ``AgentOpsSaver``, ``AgentOpsCallbackHandler``)
against a real web server and worker, with every write decided over the API by a second user:
every tool message the model gets is the recorded output, but for the one write the reviewer
rejects, whose reason reaches the model instead."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from typing import Any

import httpx
import pytest
from agentops_client import AsyncClient

from examples.airline.langgraph_replay import replay, thread_id
from examples.airline.replay import recorded_calls
from examples.airline.store import Store
from runs.models import ModelCall, Run, Step, StepStatus, ToolCall
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA, TRAJECTORIES, WRITES
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.long, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CONVERSATIONS = 20
# The write the reviewer refuses: task 15/0's last call, after which the recorded agent only
# answers, so no later output depends on it.
REFUSED = ("cancel_reservation", {"reservation_id": "GV1N64"})
REASON = "a business fare booked weeks ago is not refunded: offer a change instead"


async def decide(reviewer: AsyncClient, stop: asyncio.Event) -> Counter[str]:
    """As the reviewer, reject the ``REFUSED`` call with ``REASON`` and approve every other
    pending call until ``stop``; returns how many of each it decided."""
    decided: Counter[str] = Counter()
    while not stop.is_set():
        for approval in await reviewer.pending_approvals():
            if (approval.tool, approval.args) == REFUSED:
                await reviewer.reject(approval.id, REASON)
                decided["reject"] += 1
            else:
                await reviewer.approve(approval.id, comment="as recorded")
                decided["approve"] += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)
    return decided


def test_twenty_conversations_replay_exactly_and_a_rejection_reaches_the_model(
    worker, asgi_server, seeded, replay_model_url
):
    agent = make_user("lg-agent", "operator")
    reviewer = make_user("lg-reviewer", "reviewer")
    tokens = [make_token(user) for user in (agent, reviewer)]

    async def scenario() -> tuple[Any, Counter[str]]:
        stop = asyncio.Event()
        async with AsyncClient(asgi_server.url, tokens[1]) as client:
            deciding = asyncio.create_task(decide(client, stop))
            try:
                report = await replay(
                    TRAJECTORIES,
                    url=asgi_server.url,
                    token=tokens[0],
                    model_url=replay_model_url,
                    limit=CONVERSATIONS,
                    dsn=AIRLINE_DSN,
                    data_dir=DATA,
                    concurrency=8,
                )
            finally:
                stop.set()
                decided = await deciding
        return report, decided

    report, decided = asyncio.run(scenario())
    print(report.summary())
    conversations = json.loads(TRAJECTORIES.read_text())[:CONVERSATIONS]
    recorded = {(c["task_id"], c["trial"]): recorded_calls(c["traj"]) for c in conversations}
    assert len(report.conversations) == CONVERSATIONS
    assert {c.status for c in report.conversations} == {"succeeded"}
    assert report.calls == sum(len(calls) for calls in recorded.values()) == 123
    # Every tool message the model got is the recorded output, but the refused call's,
    # which is the reviewer's reason.
    refusal = f"Rejected by lg-reviewer: {REASON}"
    assert {(c.task_id, c.trial): c.mismatches for c in report.conversations if c.mismatches} == {
        (15, 0): [(2, "cancel_reservation", refusal, recorded[15, 0][2][2][:200])]
    }

    runs = Run.objects.filter(metadata__framework="langgraph")
    assert runs.count() == CONVERSATIONS
    # The model itself was sent the refusal as the call's tool message.
    sent = httpx.get(f"{replay_model_url}/v1/requests").json()["requests"]
    tool_messages = [
        m["content"]
        for request in sent
        if request["model"] == "tau-bench/15/0"
        for m in request["messages"]
        if m["role"] == "tool"
    ]
    assert refusal in tool_messages

    steps = Step.objects.filter(run__in=runs)
    writes = steps.filter(tool__in=WRITES)
    assert writes.count() == 31
    # Every call held for a reviewer (the writes among them) was decided by the second user
    # over the API: all approved but the refused one.
    gated = steps.filter(approval__isnull=False)
    assert set(writes) <= set(gated)
    assert decided == {"approve": gated.count() - 1, "reject": 1}
    assert set(gated.values_list("approval__decisions__reviewer", flat=True)) == {reviewer.pk}
    assert [s.status for s in writes.filter(approval__decisions__decision="reject")] == [
        StepStatus.REJECTED
    ]
    # τ-bench's refusals ("Error: ..."), and only those, are marked tool errors.
    marked = steps.filter(tool_error=True)
    assert marked.count() == 14
    assert all(s.result.startswith("Error:") for s in marked)
    # Every model turn was recorded once, with its tokens: each tool call the model made
    # appears once in its run's conversation, as many as the run has steps.
    for run in runs:
        calls = Counter(
            call["id"]
            for message in run.messages.filter(role="assistant")
            for call in message.tool_calls or []
        )
        assert set(calls.values()) <= {1}, run.metadata
        assert sum(calls.values()) == run.steps.count(), run.metadata
    assert not ModelCall.objects.filter(run__in=runs, input_tokens=0).exists()
    # Each approved write ran once: one ledger entry, one effect in the airline data.
    keys = Counter(
        ToolCall.objects.filter(step__in=writes).values_list("idempotency_key", flat=True)
    )
    assert len(keys) == 30
    assert set(keys.values()) == {1}
    store = Store(AIRLINE_DSN, DATA)
    try:
        session = runs.first().metadata["session"]
        effects: Counter[str] = Counter()
        for c in report.conversations:
            for key, _tool, _output in store.effects(thread_id(session, c.task_id, c.trial)):
                effects[key] += 1
    finally:
        store.close()
    assert effects == keys
