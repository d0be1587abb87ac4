"""A run's stream delivers committed transitions and replays missed ones on reconnect."""

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from agentops.actors import Actor
from audit.selectors import event_list
from runs.control.lifecycle import run_cancel
from tests.live.conftest import (
    SEND_EMAIL,
    acreate_run,
    assert_nothing_more,
    communicator,
    receive_events,
    session_cookie,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("live_db")]

LOW = {"tool": "calculate", "args": {"expression": "1+1"}}
CANCEL_VERBS = {"run.cancelled", "approval.cancelled", "step.cancelled"}


def cancelled(events):
    """Whether every event of cancelling a run waiting for approval has arrived."""
    return {e["verb"] for e in events} >= CANCEL_VERBS


@database_sync_to_async
def event_ids(run_id):
    return list(event_list(run_id=run_id).values_list("id", flat=True))


acancel = database_sync_to_async(run_cancel)


def test_committed_transition_arrives_live(operator):
    operator_cookie = session_cookie(operator)

    async def scenario():
        run = await acreate_run(operator, [LOW, SEND_EMAIL])
        comm = communicator(f"/ws/runs/{run.pk}/", operator_cookie)
        assert (await comm.connect())[0]
        await acancel(run_id=run.pk, actor=Actor.for_user(operator), reason="test")
        events = await receive_events(comm, cancelled)
        run_event = next(e for e in events if e["verb"] == "run.cancelled")
        assert run_event["run_id"] == str(run.pk)
        assert run_event["from_state"] == "awaiting_approval"
        assert run_event["payload"] == {"reason": "test"}
        await comm.disconnect()

    async_to_sync(scenario)()


def test_all_runs_stream_gets_every_runs_events(operator):
    operator_cookie = session_cookie(operator)

    async def scenario():
        comm = communicator("/ws/runs/", operator_cookie)
        assert (await comm.connect())[0]
        first = await acreate_run(operator, [LOW])
        second = await acreate_run(operator, [LOW])
        events = await receive_events(
            comm, lambda got: sum(e["verb"] == "run.succeeded" for e in got) == 2
        )
        assert {e["run_id"] for e in events} == {str(first.pk), str(second.pk)}
        await comm.disconnect()

    async_to_sync(scenario)()


def test_reconnect_with_after_replays_missed_events_first_without_duplicates(operator):
    operator_cookie = session_cookie(operator)

    async def scenario():
        run = await acreate_run(operator, [LOW, SEND_EMAIL])
        stored = await event_ids(run.pk)
        seen = stored[2]
        comm = communicator(f"/ws/runs/{run.pk}/?after={seen}", operator_cookie)
        assert (await comm.connect())[0]
        replayed = await receive_events(comm, lambda got: len(got) == len(stored) - 3)
        assert [e["id"] for e in replayed] == stored[3:]
        # Live events follow the replay, each exactly once.
        await acancel(run_id=run.pk, actor=Actor.for_user(operator))
        live = await receive_events(comm, cancelled)
        await assert_nothing_more(comm, f"run.{run.pk}")
        ids = [e["id"] for e in replayed + live]
        assert ids == sorted(set(ids))
        assert ids == (await event_ids(run.pk))[3:]
        await comm.disconnect()

    async_to_sync(scenario)()


def test_without_after_only_live_events_are_sent(operator):
    operator_cookie = session_cookie(operator)

    async def scenario():
        run = await acreate_run(operator, [SEND_EMAIL])
        comm = communicator(f"/ws/runs/{run.pk}/", operator_cookie)
        assert (await comm.connect())[0]
        await assert_nothing_more(comm, f"run.{run.pk}")
        await comm.disconnect()

    async_to_sync(scenario)()
