"""The Python SDK against a real agentops (daphne, a Celery worker, PostgreSQL, Redis): a
reviewer's rejection reaches the agent, which replans; a restarted client gets its recorded
results instead of running its tools again; waits end over the WebSocket."""

from __future__ import annotations

import threading
import time

import pytest
from agentops_client import Client, Rejected
from django.urls import reverse

from runs.models import Run, StepStatus, ToolCall
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def clients(worker, asgi_server, seeded):
    """The agent's and the reviewer's clients; polling every 60 s, so a wait that ends in
    time ended over the WebSocket."""
    agent = make_user("sdk-agent", "operator")
    reviewer = make_user("sdk-reviewer", "reviewer")
    made = [
        Client(asgi_server.url, make_token(user), poll_interval=60) for user in (agent, reviewer)
    ]
    yield made
    for client in made:
        client.close()


def decide_when_pending(reviewer: Client, decide) -> threading.Thread:
    def loop() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pending = reviewer.pending_approvals()
            if pending:
                decide(pending[0])
                return
            time.sleep(0.1)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_a_rejected_write_gives_the_agent_the_reason_and_it_replans(clients, client):
    agent, reviewer = clients
    run = agent.start_run("refund the customer", metadata={"ticket": 42})
    refunds: list[int] = []

    @run.tool
    def issue_refund(amount: int) -> dict[str, int]:  # "issue_*": no rule, high risk
        refunds.append(amount)
        return {"refunded": amount}

    @run.tool
    def get_policy(topic: str) -> str:
        return f"{topic}: at most $100 without a manager"

    decide_when_pending(reviewer, lambda a: reviewer.reject(a.id, "over $100 needs a manager"))
    first = issue_refund(amount=600)
    assert isinstance(first, Rejected)
    assert (first.reason, first.reviewer) == ("over $100 needs a manager", "sdk-reviewer")
    assert refunds == []
    # The agent reads the policy and asks for what it may do instead.
    assert get_policy(topic="refunds") == "refunds: at most $100 without a manager"
    decide_when_pending(reviewer, lambda a: reviewer.approve(a.id, "ok"))
    assert issue_refund(amount=100) == {"refunded": 100}
    assert refunds == [100]
    finished = run.complete()
    finished = run.wait_finished(timeout=30)
    assert finished.status == "succeeded"
    steps = Run.objects.get(pk=run.run_id).steps.order_by("index")
    assert [(s.tool, s.status, s.args) for s in steps] == [
        ("issue_refund", StepStatus.REJECTED, {"amount": 600}),
        ("get_policy", StepStatus.SUCCEEDED, {"topic": "refunds"}),
        ("issue_refund", StepStatus.SUCCEEDED, {"amount": 100}),
    ]
    # The run's timeline shows the refused call with its reason, and the one that ran.
    client.force_login(Run.objects.get(pk=run.run_id).requested_by)
    html = client.get(reverse("run-detail", args=[run.run_id])).content.decode()
    assert 'data-step-status="rejected"' in html
    assert "over $100 needs a manager" in html
    assert html.count('data-step-status="succeeded"') == 2


def test_a_restarted_client_gets_its_recorded_results_without_running_again(clients, asgi_server):
    agent, _ = clients
    ran: list[str] = []

    def lookup(city: str) -> str:
        ran.append(city)
        return f"sunny in {city}"

    run = agent.start_run("weather", idempotency_key="weather-run-1")
    assert run.call_tool("get_weather", {"city": "Oslo"}, lookup) == "sunny in Oslo"
    # The process dies here; a new one reattaches and makes the same calls again.
    again = Client(asgi_server.url, agent.aio.token)
    try:
        same = again.start_run("weather", idempotency_key="weather-run-1")
        assert same.run_id == run.run_id
        resumed = again.resume(run.run_id)
        assert resumed.call_tool("get_weather", {"city": "Oslo"}, lookup) == "sunny in Oslo"
        assert resumed.call_tool("get_weather", {"city": "Rome"}, lookup) == "sunny in Rome"
    finally:
        again.close()
    assert ran == ["Oslo", "Rome"]
    assert ToolCall.objects.filter(run_id=run.run_id).count() == 2


def test_a_wait_ends_over_the_websocket_when_a_reviewer_decides(clients):
    agent, reviewer = clients
    run = agent.start_run("cancel a booking")
    step = agent.append_step(run.run_id, "cancel_reservation", {"reservation_id": "ABC123"})
    assert step.status == "awaiting_approval"
    decide_when_pending(reviewer, lambda a: (time.sleep(0.5), reviewer.approve(a.id)))
    ready = agent.wait_for_step(run.run_id, step.id, timeout=30)
    assert ready.status == "ready"
    with pytest.raises(TimeoutError):
        agent.wait_for_step(
            run.run_id,
            agent.append_step(run.run_id, "cancel_reservation", {"reservation_id": "XYZ789"}).id,
            timeout=0.5,
        )
