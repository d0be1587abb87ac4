"""Proving that a refused action changed nothing: the rows of runs, steps, attempts,
checkpoints, ledger, approval requests and decisions, artifacts, and the audit log, compared
before and after, field by field; and, at a synchronisation point, that nothing went out to
the live streams."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from channels.layers import DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer, channel_layers
from django.db.models import Model

from approvals.models import ApprovalDecision, ApprovalMark, ApprovalRequest
from artifacts.models import Artifact
from audit import live
from audit.models import AuditEvent
from memory.models import MemoryItem, MemoryVersion
from projects.models import Project
from runs.models import (
    AgentSession,
    Checkpoint,
    Compaction,
    Message,
    Run,
    StateSchema,
    StateVersion,
    Step,
    StepAttempt,
    ThreadBlob,
    ThreadCheckpoint,
    ThreadWrite,
    ToolCall,
)

# Everything a run's history is made of (``IdempotencyKey`` is left out: a refused POST with
# a key records its answer for replay, by design).
MODELS: list[type[Model]] = [
    AgentSession,
    Run,
    Step,
    StepAttempt,
    Checkpoint,
    StateSchema,
    StateVersion,
    ToolCall,
    Message,
    Compaction,
    ThreadCheckpoint,
    ThreadBlob,
    ThreadWrite,
    ApprovalRequest,
    ApprovalDecision,
    ApprovalMark,
    Artifact,
    AuditEvent,
    MemoryItem,
    MemoryVersion,
]
MARKER = {"type": "audit.events", "events": [{"id": -1, "verb": "test.marker"}]}


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of ``MODELS``, as field values, in primary-key order."""
    return {
        model.__name__: list(model._default_manager.order_by("pk").values()) for model in MODELS
    }


def _differences(before: dict[str, list[Any]], after: dict[str, list[Any]]) -> list[str]:
    found = []
    for name, rows in before.items():
        if rows != after[name]:
            old = {row["id"]: row for row in rows}
            new = {row["id"]: row for row in after[name]}
            added = sorted(set(new) - set(old))
            removed = sorted(set(old) - set(new))
            changed = [
                (pk, {k for k in new[pk] if new[pk][k] != old[pk][k]})
                for pk in sorted(set(old) & set(new))
                if new[pk] != old[pk]
            ]
            found.append(f"{name}: added {added}, removed {removed}, changed {changed}")
    return found


@contextmanager
def assert_unchanged(*, live_streams: bool = True) -> Iterator[None]:
    """Fail unless the block leaves every row of ``MODELS`` as it was and (``live_streams``)
    sends nothing to the ``runs`` and ``approvals`` groups of any project: after the block,
    once every event this process committed has gone out, markers sent to each group are the
    first messages a channel subscribed before the block receives.

    Raises:
        AssertionError: something changed (named in the message).
    """
    if not live_streams:
        with _rows_unchanged():
            yield
        return
    # What was committed before the block has gone out before the channel listens.
    live.flush()
    groups = _groups()
    layer = _listening_layer()
    # One event loop for the whole block, and a layer of the block's own: a receive that
    # timed out here leaves nothing (a held receive lock, a loop's connections) behind for
    # the process's layer, which the next test's code uses from another loop.
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        channel = runner.run(_subscribe(layer, groups))
        try:
            with _rows_unchanged():
                yield
            received = runner.run(_drain(layer, channel, groups))
            assert received == [MARKER] * len(groups), received
        finally:
            runner.run(_unsubscribe(layer, channel, groups))


@contextmanager
def _rows_unchanged() -> Iterator[None]:
    before = snapshot()
    yield
    differences = _differences(before, snapshot())
    assert not differences, differences


def _listening_layer() -> Any:
    """A new instance of the default channel layer; the process's own where messages stay in
    the process (the in-memory layer: another instance would hear nothing)."""
    layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
    return (
        channel_layers[DEFAULT_CHANNEL_LAYER] if isinstance(layer, InMemoryChannelLayer) else layer
    )


def _groups() -> list[str]:
    ids = Project.objects.order_by("pk").values_list("pk", flat=True)
    return [group(pid) for pid in ids for group in (live.runs_group, live.approvals_group)]


async def _subscribe(layer: Any, groups: list[str]) -> str:
    channel = await layer.new_channel()
    for group in groups:
        await layer.group_add(group, channel)
    return str(channel)


async def _drain(layer: Any, channel: str, groups: list[str]) -> list[dict[str, Any]]:
    await asyncio.to_thread(live.flush)
    for group in groups:
        await layer.group_send(group, MARKER)
    received: list[dict[str, Any]] = []
    while received.count(MARKER) < len(groups):
        received.append(await asyncio.wait_for(layer.receive(channel), 10))
    return received


async def _unsubscribe(layer: Any, channel: str, groups: list[str]) -> None:
    for group in groups:
        await layer.group_discard(group, channel)
    if layer is not channel_layers[DEFAULT_CHANNEL_LAYER]:
        await layer.close_pools()
