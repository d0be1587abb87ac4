"""Publishing committed audit events to live (WebSocket) clients through the channel layer.

Groups: ``runs.<project id>`` (every run's events of one project, and its sessions'),
``run.<uuid>`` (one run's), ``session.<uuid>`` (one session's own events) and
``approvals.<project id>`` (events of one project whose verb starts with ``approval.``).
Each group gets one message per committed transaction, ``{"type": "audit.events", "events":
[{...}, ...]}``: that transaction's events for the group in order, each with the same JSON as
``GET /api/v1/runs/{id}/events/`` (a step's transaction commits three or four events; one
message instead of one per event cuts the channel-layer work of a step by as much). The
sender waits a moment (``COALESCE_SECONDS``) before sending, and the transactions committed
meanwhile go as one message per group, still in commit order (``merged``). Only the groups
some client has joined get it (``_watched``): most runs have nobody watching.

Events are sent after their transaction commits. With Redis, a per-process sender thread with
its own event loop sends them in commit order, so the transaction's caller (a worker finishing
a step) does not wait for Redis and the loop keeps its connections; without Redis (the
in-memory layer of a quick local start) they are sent inline. A client that misses a message
(the process died before sending it, or Redis was down) replays it from the database when it
reconnects. While Redis cannot be reached the events are dropped, and the outage is logged
when it begins and ends (``agentops.outages``), not per message.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from agentops.outages import REDIS_UNREACHABLE, Outage
from audit.models import SESSION_CHAIN_PREFIX

if TYPE_CHECKING:
    from audit.models import AuditEvent

logger = logging.getLogger(__name__)

CHANNEL_LAYER = Outage(
    "the channel layer (Redis)",
    "live events are not published: live clients read what they missed from the database "
    "when they reconnect",
)


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


def session_group(session_id: object) -> str:
    """The channel-layer group of one session's own events (its chain, ``session:<uuid>``)."""
    return f"session.{session_id}"


def groups_for(event: AuditEvent) -> list[str]:
    """Every group that should receive ``event``."""
    groups = []
    if event.run_id:
        groups.append(run_group(event.run_id))
    if event.chain.startswith(SESSION_CHAIN_PREFIX):
        groups.append(session_group(event.chain.removeprefix(SESSION_CHAIN_PREFIX)))
    if event.project_id is not None:
        groups.append(runs_group(event.project_id))
        if event.verb.startswith("approval."):
            groups.append(approvals_group(event.project_id))
    return groups


async def _watched(layer: Any, groups: list[str]) -> set[str]:
    """Those of ``groups`` that some client has joined, by one pipelined count per Redis
    connection of channels_redis's ``RedisChannelLayer`` (its group key and expiry, as its
    ``group_send`` reads them: channels_redis 4.x); every one of ``groups`` for another layer,
    or when Redis answered with an error.

    Asked after the events' commit, as ``group_send`` would: a client joins its groups before
    it reads the database (``audit.consumers``), so one that joined too late to be counted
    here reads these events from the database instead.
    """
    if not hasattr(layer, "_group_key"):
        return set(groups)
    try:
        by_connection: dict[int, list[str]] = {}
        for group in groups:
            by_connection.setdefault(layer.consistent_hash(group), []).append(group)
        oldest = int(time.time()) - layer.group_expiry
        watched: set[str] = set()
        for index, some in by_connection.items():
            pipe = layer.connection(index).pipeline(transaction=False)
            for group in some:
                pipe.zcount(layer._group_key(group), oldest, "+inf")
            counts = await pipe.execute()
            watched.update(group for group, count in zip(some, counts, strict=True) if count)
    except REDIS_UNREACHABLE:
        raise
    except Exception:
        logger.exception("could not read who watches %s; sending to all", groups)
        return set(groups)
    return watched


async def _send_batch(layer: Any, batch: Batch) -> None:
    # The database already holds the events; a client that missed them replays them on
    # reconnect, so a broken channel layer must not fail anything else.
    if CHANNEL_LAYER.skipping():
        return
    try:
        await _send_to_watched(layer, batch)
    except REDIS_UNREACHABLE as exc:
        CHANNEL_LAYER.failed(exc)
        return
    CHANNEL_LAYER.reached()


async def _send_to_watched(layer: Any, batch: Batch) -> None:
    # Most groups have no client (no one watching that run): their ``group_send`` would cost
    # two Redis round trips each for nothing, a tenth of a worker's CPU a step
    # (``benchmarks/HISTORY.md``, 2026-11-25, 21:27); one pipelined count per batch finds them.
    watched = await _watched(layer, [group for group, _ in batch])
    for group, message in batch:
        if group not in watched:
            continue
        try:
            await layer.group_send(group, message)
        except REDIS_UNREACHABLE:
            raise
        except Exception:
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


# How long the sender waits, once woken, for more transactions to commit before it sends:
# a worker commits a step every few ms, and waking the sender thread for each (it then holds
# the interpreter's lock for its Redis work while the worker waits) cost a worker about a
# tenth of its steps (benchmarks/HISTORY.md, 2026-11-25, 14:03 and 15:00). Live events arrive
# at most this much later.
COALESCE_SECONDS = 0.01


class _Sender:
    """A daemon thread running an event loop that sends batches in the order they come: woken
    by the first batch after it sent the last, it waits ``COALESCE_SECONDS`` and sends what
    has come meanwhile (``merged``), so a busy process wakes it once per few transactions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent_all = threading.Condition(self._lock)
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._pending: list[Batch] = []
        self._woken = False
        self._submitted = 0
        self._sent = 0

    def _start(self) -> tuple[asyncio.AbstractEventLoop, asyncio.Event]:
        with self._lock:
            # A forked child (a Celery pool process) inherits no running thread: start anew.
            if self._pid != os.getpid() or self._loop is None or self._wakeup is None:
                loop = asyncio.new_event_loop()
                wakeup = asyncio.Event()
                threading.Thread(target=loop.run_forever, name="audit-live", daemon=True).start()
                asyncio.run_coroutine_threadsafe(self._drain(wakeup), loop)
                self._pid, self._loop, self._wakeup = os.getpid(), loop, wakeup
                self._pending, self._woken, self._submitted, self._sent = [], False, 0, 0
            return self._loop, self._wakeup

    async def _drain(self, wakeup: asyncio.Event) -> None:
        layer = get_channel_layer()
        while True:
            await wakeup.wait()
            wakeup.clear()
            await asyncio.sleep(COALESCE_SECONDS)
            with self._lock:
                batches, self._pending, self._woken = self._pending, [], False
            for first in range(0, len(batches), MERGED_TRANSACTIONS):
                await _send_batch(layer, merged(batches[first : first + MERGED_TRANSACTIONS]))
            with self._lock:
                self._sent += len(batches)
                self._sent_all.notify_all()

    def submit(self, batch: Batch) -> None:
        loop, wakeup = self._start()
        with self._lock:
            self._pending.append(batch)
            self._submitted += 1
            if self._woken:
                return
            self._woken = True
        loop.call_soon_threadsafe(wakeup.set)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until every submitted batch is sent (at most ``timeout`` seconds)."""
        if self._pid != os.getpid() or self._loop is None:
            return
        with self._lock:
            target = self._submitted
            if not self._sent_all.wait_for(lambda: self._sent >= target, timeout):
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
    never before. A failure to send (Redis down) is logged, not raised: the events are
    committed, and a live client that missed them reads them back on reconnecting
    (``?after=``)."""
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

    transaction.on_commit(send, robust=True)
