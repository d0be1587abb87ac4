"""Each test has a channel layer instance of its own: a receive an earlier test left behind on
the process's layer (its event loop stopped with the receive pending) cannot break the next
test's consumers. channels-redis keeps one receive lock per layer instance, bound to the loop
that took it; once, such a leftover made two live tests of a pytest worker fail with "is bound
to a different event loop"."""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

# The receive the first test leaves pending, kept so that nothing collects it (which would
# free the lock) before the second test runs.
_left_pending: list[asyncio.Task[None]] = []


def test_first_a_receive_is_left_pending_in_a_stopped_event_loop() -> None:
    layer = get_channel_layer()
    loop = asyncio.new_event_loop()

    async def listen() -> None:
        channel = await layer.new_channel()
        loop.stop()  # after this step: the receive below waits on Redis, holding the lock
        await layer.receive(channel)

    _left_pending.append(loop.create_task(listen()))
    loop.run_forever()


def test_then_the_next_test_sends_and_receives_on_the_process_layer() -> None:
    layer = get_channel_layer()

    async def round_trip() -> dict[str, str]:
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "hello"})
        return await asyncio.wait_for(layer.receive(channel), 10)

    assert async_to_sync(round_trip)() == {"type": "hello"}
