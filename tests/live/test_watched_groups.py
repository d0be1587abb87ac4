"""Live events go only to the groups some client joined (``audit.live._watched``): most runs
have nobody watching them, and sending to their groups cost each commit's sender two Redis
round trips a group for nothing."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio.client
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from agentops.outages import Outage
from audit import live

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs the Redis channel layer")


def _group() -> str:
    return live.run_group(uuid.uuid4())


def _message(n: int) -> dict:
    return {"type": "audit.events", "events": [{"id": n, "verb": "test.watched"}]}


def test_a_group_is_watched_while_a_channel_has_joined_it() -> None:
    async def scenario() -> None:
        layer = get_channel_layer()
        group, other = _group(), _group()
        assert await live._watched(layer, [group, other]) == set()
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        try:
            assert await live._watched(layer, [group, other]) == {group}
        finally:
            await layer.group_discard(group, channel)
        assert await live._watched(layer, [group, other]) == set()

    async_to_sync(scenario)()


def test_a_batch_reaches_the_watched_group_and_sends_nothing_to_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        layer = get_channel_layer()
        watched, unwatched = _group(), _group()
        channel = await layer.new_channel()
        await layer.group_add(watched, channel)
        sent: list[str] = []
        group_send = layer.group_send

        async def recording(group: str, message: dict) -> None:
            sent.append(group)
            await group_send(group, message)

        monkeypatch.setattr(layer, "group_send", recording)
        try:
            await live._send_batch(layer, [(unwatched, _message(1)), (watched, _message(2))])
            received = await layer.receive(channel)
        finally:
            await layer.group_discard(watched, channel)
        assert sent == [watched]
        assert received["events"] == [{"id": 2, "verb": "test.watched"}]

    async_to_sync(scenario)()


def test_when_redis_cannot_say_who_watches_every_group_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def refused(self: object, *args: object, **kwargs: object) -> None:
        raise redis.exceptions.ResponseError("WRONGTYPE Operation against a key")

    monkeypatch.setattr(redis.asyncio.client.Pipeline, "execute", refused)
    groups = [_group(), _group()]
    layer = get_channel_layer()
    assert async_to_sync(live._watched)(layer, groups) == set(groups)


def test_while_redis_is_unreachable_batches_are_dropped_and_the_outage_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    outage = Outage("the channel layer", "live events are dropped", retry_seconds=0)
    monkeypatch.setattr(live, "CHANNEL_LAYER", outage)
    sent: list[str] = []

    async def recording(group: str, message: dict) -> None:
        sent.append(group)

    async def unreachable(self: object, *args: object, **kwargs: object) -> None:
        raise redis.exceptions.ConnectionError("Redis went away")

    layer = get_channel_layer()
    monkeypatch.setattr(layer, "group_send", recording)
    with monkeypatch.context() as down:
        down.setattr(redis.asyncio.client.Pipeline, "execute", unreachable)
        for n in range(3):
            async_to_sync(live._send_batch)(layer, [(_group(), _message(n))])
    assert sent == []
    # Back: the next batch is sent (to nobody watching) and the outage's end is logged.
    async_to_sync(live._send_batch)(layer, [(_group(), _message(3))])
    logged = [r.getMessage() for r in caplog.records if r.name == "agentops.outages"]
    assert len(logged) == 2, logged
    assert logged[0].startswith("the channel layer is unreachable (ConnectionError: Redis went")
    assert logged[1].startswith("the channel layer is reachable again after")
