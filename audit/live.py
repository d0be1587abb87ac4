"""Publishing committed audit events to live (WebSocket) clients through the channel layer.

Groups: ``runs.<project id>`` (every run's events of one project), ``run.<uuid>`` (one run's)
and ``approvals.<project id>`` (events of one project whose verb starts with ``approval.``).
Each group gets one message per committed transaction, ``{"type": "audit.events", "events":
[{...}, ...]}``: that transaction's events for the group in order, each with the same JSON as
``GET /api/v1/runs/{id}/events/`` (a step's transaction commits three or four events; one
message instead of one per event cuts the channel-layer work of a step by as much). When the
sender is behind (a worker commits steps faster than Redis takes their messages), the waiting
transactions' events go as one message per group, still in commit order (``merged``).

Events are sent after their transaction commits. With Redis, a per-process sender thread with
its own event loop sends them in commit order, so the transaction's caller (a worker finishing
a step) does not wait for Redis and the loop keeps its connections; without Redis (the
in-memory layer of a quick local start) they are sent inline. A client that misses a message
(the process died before sending it) replays it from the database when it reconnects.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

if TYPE_CHECKING:
    from audit.models import AuditEvent

logger = logging.getLogger(__name__)


def runs_group(project_id: int) -> str:
    """The channel-layer group of the events of every run of one project."""
    return f"runs.{project_id}"


def approvals_group(project_id: int) -> str:
    """The channel-layer group of the approval events of one project."""
    return f"approvals.{project_id}"


Batch = list[tuple[str, dict[str, Any]]]


def run_group(run_id: object) -> str:
    """The channel-layer group of one run's events."""
    return f"run.{run_id}"


def groups_for(event: AuditEvent) -> list[str]:
    """Every group that should receive ``event``."""
    groups = []
    if event.run_id:
        groups.append(run_group(event.run_id))
    if event.project_id is not None:
        groups.append(runs_group(event.project_id))
        if event.verb.startswith("approval."):
            groups.append(approvals_group(event.project_id))
    return groups


async def _send_batch(layer: Any, batch: Batch) -> None:
    for group, message in batch:
        try:
            await layer.group_send(group, message)
        except Exception:
            # The database already holds the event; a client that missed it replays it on
            # reconnect, so a broken channel layer must not fail anything else.
            logger.exception("could not publish audit event to %s", group)


# At most this many committed transactions' events go in one message per group.
MERGED_TRANSACTIONS = 50


def merged(batches: list[Batch]) -> Batch:
    """The messages of several committed transactions (``batches``, in commit order) as one
    message per group: each group's events in commit order, groups in the order they first
    appear."""
    events: dict[str, list[Any]] = {}
    for batch in batches:
        for group, message in batch:
            events.setdefault(group, []).extend(message["events"])
    return [(group, {"type": "audit.events", "events": found}) for group, found in events.items()]


class _Sender:
    """A daemon thread running an event loop that sends batches in the order they come."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Batch] | None = None

    def _start(self) -> tuple[asyncio.AbstractEventLoop, asyncio.Queue[Batch]]:
        with self._lock:
            # A forked child (a Celery pool process) inherits no running thread: start anew.
            if self._pid != os.getpid() or self._loop is None or self._queue is None:
                loop = asyncio.new_event_loop()
                queue: asyncio.Queue[Batch] = asyncio.Queue()
                threading.Thread(target=loop.run_forever, name="audit-live", daemon=True).start()
                asyncio.run_coroutine_threadsafe(self._drain(queue), loop)
                self._pid, self._loop, self._queue = os.getpid(), loop, queue
            return self._loop, self._queue

    @staticmethod
    async def _drain(queue: asyncio.Queue[Batch]) -> None:
        layer = get_channel_layer()
        while True:
            batches = [await queue.get()]
            while len(batches) < MERGED_TRANSACTIONS and not queue.empty():
                batches.append(queue.get_nowait())
            await _send_batch(layer, merged(batches))
            for _ in batches:
                queue.task_done()

    def submit(self, batch: Batch) -> None:
        loop, queue = self._start()
        loop.call_soon_threadsafe(queue.put_nowait, batch)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until every submitted batch is sent (at most ``timeout`` seconds)."""
        if self._pid != os.getpid() or self._loop is None or self._queue is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._queue.join(), self._loop)
        try:
            future.result(timeout)
        except TimeoutError:
            logger.warning("live events still unsent after %s s", timeout)


_sender = _Sender()
atexit.register(_sender.flush)


def flush(timeout: float = 5.0) -> None:
    """Block until this process has sent every live event it committed (tests, commands)."""
    _sender.flush(timeout)


def _dispatch(batch: Batch) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    if type(layer).__module__.startswith("channels_redis"):
        _sender.submit(batch)
    else:
        async_to_sync(_send_batch)(layer, batch)


def publish_on_commit(events: list[AuditEvent]) -> None:
    """Send ``events`` (in order) to their groups once the surrounding transaction commits,
    never before."""
    from audit.serializers import event_json

    def send() -> None:
        by_group: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            data = event_json(event)
            for group in groups_for(event):
                by_group.setdefault(group, []).append(data)
        if by_group:
            _dispatch(
                [
                    (group, {"type": "audit.events", "events": batch})
                    for group, batch in by_group.items()
                ]
            )

    transaction.on_commit(send)
