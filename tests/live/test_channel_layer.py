"""The channel layer's Redis connections wait longer than its blocking pop: an idle
WebSocket's consumer waits on that pop, and a read timeout at the same moment killed it."""

from __future__ import annotations

from channels.layers import get_channel_layer


def test_the_redis_read_timeout_outlasts_the_blocking_pop():
    layer = get_channel_layer()
    pool = layer.create_pool(0)
    assert pool.connection_kwargs["socket_timeout"] > layer.brpop_timeout
