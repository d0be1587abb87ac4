"""A client run's grant through the Python SDK against a real agentops: a call outside it
comes back to the agent as a ``Rejected`` of type ``not_granted`` without the local function
running, and the agent goes on with the calls it may make."""

from __future__ import annotations

import pytest
from agentops_client import Client, Rejected

from approvals.models import ApprovalRequest
from runs.models import Run, StepStatus, ToolCall
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_call_outside_the_grant_is_refused_to_the_agent_which_goes_on(worker, asgi_server):
    agent = Client(asgi_server.url, make_token(make_user("sdk-granted", "operator")))
    refunds: list[int] = []
    try:
        run = agent.start_run("answer only", grant={"tools": ["get_*"]})

        @run.tool
        def issue_refund(amount: int) -> dict[str, int]:
            refunds.append(amount)
            return {"refunded": amount}

        @run.tool
        def get_policy(topic: str) -> str:
            return f"{topic}: ask a person"

        refused = issue_refund(amount=600)
        assert isinstance(refused, Rejected)
        assert refused.type == "not_granted"
        assert "issue_refund is not among the granted tools" in refused.reason
        assert get_policy(topic="refunds") == "refunds: ask a person"
        run.complete()
        assert run.wait_finished(timeout=30).status == "succeeded"
    finally:
        agent.close()
    # The local function never ran, nothing was gated or put in the ledger for it.
    assert refunds == []
    steps = list(Run.objects.get(pk=run.run_id).steps.order_by("index"))
    assert [(s.tool, s.status) for s in steps] == [
        ("issue_refund", StepStatus.REFUSED),
        ("get_policy", StepStatus.SUCCEEDED),
    ]
    assert not ToolCall.objects.filter(step=steps[0]).exists()
    assert not ApprovalRequest.objects.exists()
