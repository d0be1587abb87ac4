"""Memory writes as tool calls (``memory.put``, ``memory.delete``): a risk rule holds a write
to the ``policies`` namespace for a reviewer, whose card shows the proposed item beside the
current one; approved, it is written with the run and step as provenance; rejected, nothing is
written and the reason reaches the agent as the step's error. Other writes go straight
through."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from approvals.models import RiskRule
from memory.models import MemoryItem, MemoryVersion
from tests.api.conftest import approval_url, post_run, run_url
from tests.memory.conftest import PREFS, item_query, put_item
from testsupport.state import assert_unchanged

# The tools run in a thread of their own, with its own connection: it must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

POLICY = ["policies", "refunds"]


@pytest.fixture
def policies_rule(seeded: None) -> RiskRule:
    return RiskRule.objects.create(
        pattern="memory.*",
        condition='namespace[0] == "policies"',
        risk="high",
        priority=10,
        description="memory writes to policies",
    )


@pytest.fixture
def client_run(operator_api: Any) -> dict[str, Any]:
    return post_run(operator_api, agent="client", goal="remember things").json()


def append(api: Any, run: dict[str, Any], tool: str, args: dict[str, Any], capture: Any) -> Any:
    with capture(execute=True):
        response = api.post(
            run_url(run["id"], "steps"),
            {"tool": tool, "args": args, "rationale": "the user told me"},
            format="json",
        )
    assert response.status_code == 201, response.json()
    return response.json()


def step_of(api: Any, run: dict[str, Any], index: int) -> dict[str, Any]:
    return api.get(run_url(run["id"])).json()["steps"][index]


PUT_POLICY = {"namespace": POLICY, "key": "limit", "value": {"max_refund_usd": 5000}}


def test_a_write_to_policies_waits_then_is_written_when_approved(
    operator_api,
    reviewer_api,
    reviewer,
    client,
    policies_rule,
    client_run,
    django_capture_on_commit_callbacks,
):
    put_item(operator_api, POLICY, "limit", {"max_refund_usd": 100})
    with _no_memory_change():
        append(
            operator_api, client_run, "memory.put", PUT_POLICY, django_capture_on_commit_callbacks
        )
    step = step_of(operator_api, client_run, 0)
    assert step["status"] == "awaiting_approval"
    # The reviewer's page shows the item now beside the proposed one, and the change.
    client.force_login(reviewer)
    page = client.get(reverse("approval-detail", args=[step["approval"]["id"]])).content.decode()
    assert "data-memory-proposal" in page
    current = page.split("data-memory-current")[1].split("</section>")[0]
    proposed = page.split("data-memory-proposed")[1].split("</section>")[0]
    assert "100" in current
    assert "5000" not in current
    assert "5000" in proposed
    assert 'data-diff-path="/max_refund_usd"' in page
    with django_capture_on_commit_callbacks(execute=True):
        decided = reviewer_api.post(approval_url(step["approval"]["id"], "approve"), {})
    assert decided.status_code == 200, decided.json()
    step = step_of(operator_api, client_run, 0)
    assert step["status"] == "succeeded", step["error"]
    assert step["result"]["version"] == 2
    item = MemoryItem.objects.get(namespace_path="policies.refunds", key="limit")
    assert item.value == {"max_refund_usd": 5000}
    assert (str(item.run_id), item.step_id) == (client_run["id"], step["id"])
    version = MemoryVersion.objects.get(item_id=item.pk, version=2)
    assert (str(version.run_id), version.step_index) == (client_run["id"], 0)


class _no_memory_change:
    """No memory row is written inside the block."""

    def __enter__(self) -> None:
        self.before = (
            MemoryItem.objects.count(),
            MemoryVersion.objects.count(),
            list(MemoryItem.objects.values_list("version", flat=True)),
        )

    def __exit__(self, *exc: object) -> None:
        after = (
            MemoryItem.objects.count(),
            MemoryVersion.objects.count(),
            list(MemoryItem.objects.values_list("version", flat=True)),
        )
        assert after == self.before


def test_a_rejected_write_is_not_made_and_the_agent_reads_why(
    operator_api, reviewer_api, policies_rule, client_run, django_capture_on_commit_callbacks
):
    append(operator_api, client_run, "memory.put", PUT_POLICY, django_capture_on_commit_callbacks)
    step = step_of(operator_api, client_run, 0)
    with _no_memory_change(), django_capture_on_commit_callbacks(execute=True):
        reviewer_api.post(
            approval_url(step["approval"]["id"], "reject"),
            {"comment": "refund limits come from finance, not chats"},
        )
    step = step_of(operator_api, client_run, 0)
    assert step["status"] == "rejected"
    assert step["error"]["reason"] == "refund limits come from finance, not chats"
    assert operator_api.get(item_query(POLICY, "limit")).status_code == 404


def test_a_delete_of_policies_waits_too_and_other_writes_do_not(
    operator_api, policies_rule, client_run, django_capture_on_commit_callbacks
):
    put_item(operator_api, POLICY, "limit", {"max_refund_usd": 100})
    append(
        operator_api,
        client_run,
        "memory.put",
        {"namespace": PREFS, "key": "tone", "value": {"style": "concise"}},
        django_capture_on_commit_callbacks,
    )
    assert step_of(operator_api, client_run, 0)["status"] == "succeeded"
    assert operator_api.get(item_query(PREFS, "tone")).json()["run"] == client_run["id"]
    append(
        operator_api,
        client_run,
        "memory.delete",
        {"namespace": POLICY, "key": "limit", "reason": "stale"},
        django_capture_on_commit_callbacks,
    )
    assert step_of(operator_api, client_run, 1)["status"] == "awaiting_approval"
    assert operator_api.get(item_query(POLICY, "limit")).status_code == 200


def test_a_write_the_store_refuses_fails_the_step_with_the_reason(
    operator_api, client_run, django_capture_on_commit_callbacks
):
    put_item(operator_api, PREFS, "tone", {"style": "concise"})
    stale = {"namespace": PREFS, "key": "tone", "value": {"x": 1}, "if_match": '"nope:1"'}
    append(operator_api, client_run, "memory.put", stale, django_capture_on_commit_callbacks)
    step = step_of(operator_api, client_run, 0)
    assert step["status"] == "failed"
    assert step["error"]["type"] == "precondition_failed"
    assert operator_api.get(item_query(PREFS, "tone")).json()["value"] == {"style": "concise"}


def test_tool_arguments_are_checked_before_the_step_is_accepted(operator_api, client_run):
    bad = {"tool": "memory.put", "args": {"namespace": [], "key": "k", "value": {}}}
    with assert_unchanged(live_streams=False):
        response = operator_api.post(run_url(client_run["id"], "steps"), bad, format="json")
    assert response.status_code == 400
