"""The LangGraph airline agent killed (SIGKILL) in the middle of a governed write, once the
booking took effect in the airline data and before agentops recorded it or the graph
checkpointed its tool node, then started again: it resumes its thread from the last
checkpoint, the booking is made once (the ledger and the airline data agree) and the graph
finishes."""

from __future__ import annotations

import sys
import threading
import uuid

import psycopg
import pytest
from agentops_client import Client

from examples.airline.langgraph_replay import thread_id
from examples.airline.store import Store
from runs.models import Run, Step, StepStatus, ThreadCheckpoint, ToolCall
from tests.conftest import _child_env, wait_for
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA, TRAJECTORIES
from testsupport.database import django_database_url
from testsupport.factories import make_token, make_user
from testsupport.processes import Process

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Task 10/0 makes one write, a booking (reservation HATHAT), with 8 reads around it.
TASK, TRIAL = 10, 0
CALLS = 9
USER_TURNS = 10


def approve_all(reviewer: Client, run_id: str, stop: threading.Event) -> None:
    """Approve every pending call of run ``run_id`` until ``stop``: a graph that asked again
    for a write it made would get it approved, and make it twice."""
    while not stop.wait(0.1):
        for approval in reviewer.pending_approvals():
            if approval.run_id == run_id:
                reviewer.approve(approval.id, "ok")


def test_a_graph_killed_mid_write_resumes_and_books_once(
    worker, asgi_server, seeded, replay_model_url, tmp_path
):
    agent = make_user("lg-kill-agent", "operator")
    reviewer = Client(asgi_server.url, make_token(make_user("lg-kill-reviewer", "reviewer")))
    session = f"lg-kill-{uuid.uuid4().hex[:8]}"
    thread = thread_id(session, TASK, TRIAL)
    log = tmp_path / "graph.log"
    command = [
        sys.executable, "-m", "examples.airline.langgraph_replay", str(TRAJECTORIES),
        "--only", f"{TASK}/{TRIAL}", "--url", asgi_server.url, "--token", make_token(agent),
        "--model-url", replay_model_url, "--session", session,
        "--airline-db", AIRLINE_DSN, "--data-dir", str(DATA),
    ]  # fmt: skip
    store = Store(AIRLINE_DSN, DATA)
    # Holds the tool-call ledger against writes: the client's report of the booking waits,
    # after the booking took effect, until the client is gone.
    ledger = psycopg.connect(django_database_url())
    graph = Process(command, _child_env(), log, name="graph")
    try:
        booking = wait_for(
            lambda: Step.objects.filter(
                run__metadata__session=session,
                tool="book_reservation",
                status=StepStatus.WAITING,
            ).first(),
            timeout=120,
        )
        ledger.execute(f"LOCK TABLE {ToolCall._meta.db_table} IN SHARE MODE")
        [approval] = [a for a in reviewer.pending_approvals() if a.step_id == booking.pk]
        reviewer.approve(approval.id, "ok")
        # The booking took effect in the airline data, and the report of it waits for the
        # ledger: the client is between the two.
        wait_for(lambda: store.effects(thread), timeout=60)
        wait_for(
            lambda: ledger.execute(
                "SELECT 1 FROM pg_locks WHERE relation = %s::regclass AND NOT granted",
                [ToolCall._meta.db_table],
            ).fetchone(),
            timeout=60,
        )
        last = ThreadCheckpoint.objects.filter(session__external_id=thread).first()
        assert last is not None
        graph.crash()
        assert not ToolCall.objects.filter(step=booking).exists()
        ledger.rollback()
        # The report the server was answering when its client died is recorded: the effect
        # is on record before the graph starts again.
        wait_for(lambda: ToolCall.objects.filter(step=booking, status="succeeded").exists())

        stop = threading.Event()
        approver = threading.Thread(
            target=approve_all, args=(reviewer, str(booking.run_id), stop), daemon=True
        )
        approver.start()
        graph = Process(command, _child_env(), log, name="graph")
        graph.proc.wait(timeout=120)
        stop.set()
        approver.join()
    finally:
        ledger.close()
        graph.stop(5)
        reviewer.close()
    output = log.read_text(errors="replace")
    assert graph.proc.returncode == 0, output[-3000:]
    assert f"resumes thread {thread} from checkpoint {last.checkpoint_id} (next: tools)" in output
    summary = output.strip().splitlines()[-1]
    assert summary.startswith(f"1 conversations, {CALLS} tool calls, 0 differing"), summary
    assert "runs {'succeeded': 1}" in summary

    run = Run.objects.get(metadata__session=session)
    assert run.status == "succeeded"
    # The model turns were recorded once, across the two processes: the run's conversation
    # holds each message of the thread once (the resumed graph's first turn adds only the
    # booking's result and what the model answered to it).
    assert run.messages.filter(role="user").count() == USER_TURNS
    calls = [c["function"]["name"] for m in run.messages.all() for c in m.tool_calls or []]
    assert calls == [
        "get_reservation_details", "list_all_airports", *["search_direct_flight"] * 5,
        "get_user_details", "book_reservation",
    ]  # fmt: skip
    assert [s.tool for s in run.steps.filter(tool="book_reservation")] == ["book_reservation"]
    # One ledger entry and one effect in the airline data, under the same key.
    [call] = ToolCall.objects.filter(run=run, tool="book_reservation")
    try:
        [(key, tool, output)] = store.effects(thread)
        documents = store.documents(thread)
    finally:
        store.close()
    assert (key, tool) == (call.idempotency_key, "book_reservation")
    assert call.result == output
    # The booking exists once: HATHAT, and no second reservation after it.
    assert "HATHAT" in documents["reservations"]
    assert "HATHAU" not in documents["reservations"]
    assert documents["users"]["mia_kim_4397"]["reservations"].count("HATHAT") == 1
