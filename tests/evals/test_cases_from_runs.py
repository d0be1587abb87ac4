"""Cases made from runs: the conversation is cut before the chosen call, the recorded outcome
is the calls of that agent turn, the ledger's results answer the replay's reads and writes
never run; in bulk, a case per run of a filter (a rejected run's at its rejected step)."""

from __future__ import annotations

import pytest
from agentops_client.evals import CaseReplay

from agentops.actors import Actor
from evals.from_runs import case_make_from_run, cases_make_from_runs
from evals.selectors import case_payload
from evals.services import case_set_create
from projects.services import project_default
from runs.control.conversation import run_messages_append
from runs.control.create import step_append
from runs.executor.client import step_report
from runs.models import Executor, Step
from runs.statuses import RunStatus
from testsupport.factories import make_run, plan_run

pytestmark = pytest.mark.django_db

ASK = {"role": "user", "content": "Order 7 arrived broken: refund it."}


def _call(call_id: str, tool: str, args: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": tool, "arguments": args}}
        ],
    }


@pytest.fixture
def client_run(operator, django_capture_on_commit_callbacks):
    """A client run: get_order then send_refund in the first agent turn, get_order again
    after the user's next message; the refund waits for a reviewer."""
    actor = Actor.for_user(operator, via_api=True)
    run = make_run(operator, agent="client", capture=django_capture_on_commit_callbacks)

    def say(*messages):
        run_messages_append(actor=actor, run_id=run.pk, messages=list(messages))

    def call(tool, args, call_id):
        with django_capture_on_commit_callbacks(execute=True):
            return step_append(
                actor=actor,
                run_id=run.pk,
                tool=tool,
                args=args,
                executor=Executor.CLIENT,
                tool_call_id=call_id,
            )

    say(ASK, _call("c1", "get_order", '{"order": 7}'))
    lookup = call("get_order", {"order": 7}, "c1")
    with django_capture_on_commit_callbacks(execute=True):
        step_report(actor=actor, run_id=run.pk, step_id=lookup.pk, report={"result": {"paid": 80}})
    say(
        {"role": "tool", "tool_call_id": "c1", "content": '{"paid": 80}'},
        _call("c2", "send_refund", '{"order": 7, "amount": 80}'),
    )
    call("send_refund", {"order": 7, "amount": 80}, "c2")
    say({"role": "user", "content": "And order 8?"}, _call("c3", "get_order", '{"order": 8}'))
    call("get_order", {"order": 8}, "c3")
    return run


def test_a_case_freezes_the_conversation_before_the_call_and_its_turn(operator, client_run):
    actor = Actor.for_user(operator)
    case_set = case_set_create(project_id=project_default().pk, name="refunds", actor=actor)
    at_refund = case_make_from_run(
        case_set_id=case_set.pk, run_id=client_run.pk, step_index=1, expect="recorded", actor=actor
    )
    assert at_refund.conversation[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"paid": 80}',
    }
    assert len(at_refund.conversation) == 3
    assert at_refund.expected["calls"] == [
        {"tool": "send_refund", "args": {"order": 7, "amount": 80}}
    ]
    assert at_refund.write_tools == ["send_refund"]
    at_lookup = case_make_from_run(
        case_set_id=case_set.pk, run_id=client_run.pk, step_index=0, expect="recorded", actor=actor
    )
    assert at_lookup.conversation == [ASK]
    assert [c["tool"] for c in at_lookup.expected["calls"]] == ["get_order", "send_refund"]

    replay = CaseReplay(case_payload(at_refund))
    assert replay.call_tool("get_order", {"order": 7}) == {"paid": 80}
    assert replay.call_tool("get_order", {"order": 9}).startswith("Error: no recorded result")
    assert replay.call_tool("send_refund", {"order": 7, "amount": 80})["sandboxed"] is True
    assert [c["sandboxed"] for c in replay.calls] == [False, False, True]
    # The refund never ran: its step still waits for a reviewer.
    assert Step.objects.get(run=client_run, index=1).status == "waiting"


def test_bulk_makes_a_case_per_run_of_the_filter(
    operator, rejected_run, django_capture_on_commit_callbacks
):
    rejected = rejected_run("wrong customer")
    succeeded = plan_run(
        operator,
        [{"tool": "echo", "args": {"value": 1}}],
        capture=django_capture_on_commit_callbacks,
    )
    assert succeeded.status == RunStatus.SUCCEEDED
    actor = Actor.for_user(operator)
    case_set = case_set_create(project_id=project_default().pk, name="weekly", actor=actor)

    failed = cases_make_from_runs(case_set_id=case_set.pk, statuses=["failed"], actor=actor)
    assert [(c.source_run_id, c.expected["kind"]) for c in failed] == [(rejected.pk, "must_not")]
    assert failed[0].expected["reason"] == "wrong customer"
    both = cases_make_from_runs(
        case_set_id=case_set.pk, statuses=["failed", "succeeded"], actor=actor
    )
    assert {c.source_run_id: c.expected["kind"] for c in both} == {
        rejected.pk: "must_not",
        succeeded.pk: "calls",
    }
    later = cases_make_from_runs(
        case_set_id=case_set.pk,
        statuses=["failed", "succeeded"],
        created_after=succeeded.created_at,
        actor=actor,
    )
    assert [c.source_run_id for c in later] == [succeeded.pk]
    case_set.refresh_from_db()
    assert case_set.version == 3
