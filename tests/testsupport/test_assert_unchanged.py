"""``assert_unchanged`` listens to the live streams on a channel layer of its own, in one event
loop: what the process's own layer is doing in another loop (a consumer blocked in a
receive, or a receive cut off by a timeout) cannot break it, and it leaves that layer as it
found it. Once, a receive of the process's layer left behind by one test made every later
``assert_unchanged`` of the pytest worker fail with "bound to a different event loop"."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from audit import live
from projects.models import Project
from testsupport.state import assert_unchanged


@pytest.fixture
def receiving_elsewhere(transactional_db: None) -> Iterator[None]:
    """The process's channel layer blocked in a receive on a loop of another thread, as a
    consumer of a live test would be, until the test ends."""
    layer = get_channel_layer()
    loop = asyncio.new_event_loop()
    started = threading.Event()

    async def listen() -> None:
        channel = await layer.new_channel()
        started.set()
        await layer.receive(channel)

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(listen())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    yield
    for task in asyncio.all_tasks(loop):
        loop.call_soon_threadsafe(task.cancel)
    thread.join(10)
    loop.close()


def test_a_receive_of_the_process_layer_in_another_loop_does_not_break_it(
    receiving_elsewhere: None, operator
) -> None:
    with assert_unchanged():
        pass


def test_what_the_process_layer_sends_in_the_block_is_still_caught(
    receiving_elsewhere: None, operator
) -> None:
    project = Project.objects.get()
    sent = {"type": "audit.events", "events": ["sent in the block"]}
    with pytest.raises(AssertionError, match="sent in the block"), assert_unchanged():
        async_to_sync(get_channel_layer().group_send)(live.runs_group(project.pk), sent)
