"""A client that reconnects with the last ``after`` the server gave it gets every event, even
one that committed after it disconnected with a smaller id than events it already saw."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from audit.streams import stream_head
from projects.services import project_default
from tests.live.conftest import acreate_run, communicator, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("live_db")]


async def messages_until(comm, done, timeout: float = 10) -> list[dict]:
    """The messages received until ``done(messages)`` holds."""
    got: list[dict] = []

    async def collect() -> None:
        while not done(got):
            got.append(await comm.receive_json_from(timeout=timeout))

    await asyncio.wait_for(collect(), timeout)
    return got


def event_ids(messages: list[dict]) -> list[int]:
    return [m["event"]["id"] for m in messages if m["type"] == "event"]


def test_the_runs_stream_resumes_before_an_event_still_uncommitted(operator, opened):
    cookie = session_cookie(operator)
    project_id = project_default().pk
    start = stream_head()

    async def scenario():
        comm = communicator(f"/ws/runs/?after={start}", cookie)
        assert (await comm.connect(timeout=10))[0]
        slow, fast = opened(project_id=project_id), opened(project_id=project_id)
        await asyncio.to_thread(slow.begin)
        await asyncio.to_thread(fast.begin)
        smaller = await asyncio.to_thread(slow.record)
        larger = await asyncio.to_thread(fast.record)
        assert smaller < larger
        await asyncio.to_thread(fast.commit)
        # The larger id arrives live at once, but the cursor stays before the open hole, also
        # after the server's catch-ups have had time to run.
        got = await messages_until(comm, lambda got: larger in event_ids(got))
        assert {m["after"] for m in got} == {start}
        assert await comm.receive_nothing(timeout=1)
        await comm.disconnect()
        # The smaller id commits while the client is away: only a reconnect can bring it.
        await asyncio.to_thread(slow.commit)
        comm = communicator(f"/ws/runs/?after={got[-1]['after']}", cookie)
        assert (await comm.connect(timeout=10))[0]
        resumed = await messages_until(comm, lambda got: bool(got) and got[-1]["after"] == larger)
        assert event_ids(resumed) == [smaller, larger]
        assert await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()

    async_to_sync(scenario)()


def test_the_cursor_moves_over_live_events_once_they_settle(operator, opened):
    cookie = session_cookie(operator)
    project_id = project_default().pk
    start = stream_head()

    async def scenario():
        comm = communicator("/ws/approvals/", cookie)
        assert (await comm.connect(timeout=10))[0]
        writer = opened(project_id=project_id)
        await asyncio.to_thread(writer.begin)
        await asyncio.to_thread(writer.record)
        await asyncio.to_thread(writer.commit)
        # Not an approval event: the approvals stream neither sends it nor moves past it
        # visibly (no message), the runs stream does.
        assert await comm.receive_nothing(timeout=1)
        await comm.disconnect()
        comm = communicator(f"/ws/runs/?after={start}", cookie)
        assert (await comm.connect(timeout=10))[0]
        got = await messages_until(comm, lambda got: len(got) == 1)
        assert got[0]["after"] == got[0]["event"]["id"]
        await comm.disconnect()

    async_to_sync(scenario)()


def test_the_run_stream_resumes_where_the_client_left(operator, opened):
    cookie = session_cookie(operator)

    async def scenario():
        run = await acreate_run(operator, [{"tool": "echo", "args": {"value": 1}}])
        start = await database_sync_to_async(stream_head)(run_id=run.pk)
        comm = communicator(f"/ws/runs/{run.pk}/?after={start}", cookie)
        assert (await comm.connect(timeout=10))[0]
        first = opened(run_id=run.pk, project_id=run.project_id)
        await asyncio.to_thread(first.begin)
        seen = await asyncio.to_thread(first.record)
        await asyncio.to_thread(first.commit)
        got = await messages_until(comm, lambda got: bool(got) and got[-1]["after"] == seen)
        assert event_ids(got) == [seen]
        assert got[0]["after"] == start
        await comm.disconnect()
        second = opened(run_id=run.pk, project_id=run.project_id)
        await asyncio.to_thread(second.begin)
        missed = await asyncio.to_thread(second.record)
        await asyncio.to_thread(second.commit)
        comm = communicator(f"/ws/runs/{run.pk}/?after={got[-1]['after']}", cookie)
        assert (await comm.connect(timeout=10))[0]
        resumed = await messages_until(comm, lambda got: len(got) == 1)
        assert resumed == [
            {"type": "event", "event": resumed[0]["event"], "after": missed},
        ]
        assert resumed[0]["event"]["id"] == missed
        await comm.disconnect()

    async_to_sync(scenario)()
