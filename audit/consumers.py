"""The base WebSocket consumer of live audit-event streams (runs, one run, approvals).

Protocol: the client connects to a stream URL, optionally with ``?after=<cursor>``, the last
cursor the server gave it (a page renders one: ``audit.streams.stream_head``). The server
sends JSON messages:

- ``{"type": "event", "event": {...}, "after": N}``: an event, in the shape of
  ``audit.serializers.AuditEventSerializer`` (the events API's shape);
- ``{"type": "cursor", "after": N}``: the cursor moved without a new event.

First come the stored events after the cursor (none when ``after`` is absent), then live
ones as they commit. **The client keeps the latest ``after`` and reconnects with it, never an
event's id**: a live event is sent as soon as its transaction commits, possibly before a
transaction that took a smaller id has committed (``audit.streams``), so an event's id is no
safe place to resume from. ``after`` moves only over events that can no longer be preceded by
one committing later: every event of the stream up to it has been sent. A reconnect may thus
repeat events the client has seen (same ``id``: ignore them), and never skips one.

Close codes (sent after the handshake, so browsers see them): 4400 bad ``after``, 4401 not
authenticated, 4403 missing permission (or a change of the projects it may follow: reconnect),
4404 unknown object or one in a project the user may not see.

A connection follows only the projects its user (and token) may see when it connects
(``projects.access``): the events of each project go to that project's group.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.exceptions import AuthenticationFailed

from agentops.tokens import TokenAuthentication
from agentops.ws_auth import token_key
from audit.serializers import AuditEventSerializer
from audit.streams import stream_events, stream_head
from projects.access import Access

CLOSE_BAD_REQUEST = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404

# Events read from the database per query while catching up.
REPLAY_BATCH = 500
# Seconds from a live message to the catch-up that moves the cursor over its events, and the
# longest wait between catch-ups while live events are still unsettled (an older transaction
# is still open).
SETTLE_DELAY = 0.1
SETTLE_MAX_DELAY = 5.0
# Ids of events the cursor passed that a live message may still bring (kept: the newest).
RECENT_PASSED = 2 * REPLAY_BATCH


@dataclass(frozen=True)
class Stream:
    """What a connection follows: channel-layer ``groups`` and the filter selecting the same
    events from the database (``run_id``: one run's; ``verb_prefix``: one verb family;
    ``project_ids``: of these projects only; ``chain``: one audit chain's, a session's)."""

    groups: tuple[str, ...]
    project_ids: tuple[int, ...]
    run_id: uuid.UUID | None = None
    verb_prefix: str = ""
    chain: str = ""


def _fresh_access(scope: dict[str, Any]) -> Access | None:
    """The connection's access read anew: its user still active, its token still valid (not
    revoked or expired), its session still open; None otherwise."""
    user_id = getattr(scope.get("user"), "pk", None)
    fresh = (
        get_user_model().objects.filter(pk=user_id, is_active=True).first()
        if user_id is not None
        else None
    )
    if fresh is None:
        return None
    key = token_key(scope)
    if key:
        try:
            token_user, token = TokenAuthentication().authenticate_credentials(key.encode())
        except (AuthenticationFailed, UnicodeEncodeError):
            return None
        return Access.of(fresh, token) if token_user.pk == fresh.pk else None
    session = scope.get("session")
    if session is not None and not session.exists(session.session_key):
        return None
    return Access(fresh)


@database_sync_to_async
def _events_after(stream: Stream, after: int) -> list[dict[str, Any]]:
    events = stream_events(
        run_id=stream.run_id,
        after=after,
        verb_prefix=stream.verb_prefix,
        project_ids=stream.project_ids,
        chain=stream.chain,
    )
    return list(AuditEventSerializer(events[:REPLAY_BATCH], many=True).data)


@database_sync_to_async
def _head(stream: Stream) -> int:
    return stream_head(run_id=stream.run_id, chain=stream.chain)


class AuditEventConsumer(AsyncJsonWebsocketConsumer):
    """Authenticate, join the stream's group, replay missed events, then forward live ones.

    The cursor (``self.cursor``) moves only in catch-ups, reads of the database through
    ``audit.streams.stream_events``: at connect, and shortly after live messages (again, with
    a growing delay, while events sent live are not settled yet). Live events go out at once
    with the cursor unchanged; ``self.unsettled`` holds their ids, so the catch-up that passes
    them does not send them twice, and ``self.passed`` the ids it passed recently, so a live
    message arriving after the catch-up does not either.

    Subclasses set ``permission`` (``app_label.codename`` the user needs in a project) and
    implement ``get_stream``.
    """

    permission = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stream: Stream | None = None
        self.cursor = 0
        self.told = 0
        self.unsettled: set[int] = set()
        self.passed: dict[int, None] = {}
        self.lock = asyncio.Lock()
        self.settling: asyncio.Task[None] | None = None
        self.checked_at = time.monotonic()

    def get_stream(self, access: Access) -> Stream | int:
        """The stream this connection asked for, as ``access`` may follow it, or the close
        code refusing it (``CLOSE_NOT_FOUND``, ``CLOSE_FORBIDDEN``). Runs in a thread: it may
        query the database."""
        raise NotImplementedError

    def _stream_now(self) -> Stream | int:
        access = _fresh_access(self.scope)
        if access is None:
            return CLOSE_UNAUTHENTICATED
        return self.get_stream(access)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._refuse(CLOSE_UNAUTHENTICATED)
            return
        try:
            after = self._after()
        except ValueError:
            await self._refuse(CLOSE_BAD_REQUEST)
            return
        stream = await database_sync_to_async(self._stream_now)()
        if isinstance(stream, int):
            await self._refuse(stream)
            return
        # Join the group before reading the database: an event committed between the two is
        # then both replayed and delivered live (the duplicate is dropped in `audit_events`),
        # whereas reading first could miss it entirely. Accepting only after joining means a
        # client that sees the connection open is already subscribed.
        self.stream = stream
        for group in stream.groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        if after is None:
            self.cursor = self.told = await _head(stream)
        else:
            self.cursor = self.told = after
            await self._catch_up()

    async def _refuse(self, code: int) -> None:
        # Accept, then close with the code: a refused handshake reaches browsers as a bare
        # 1006, while a close code tells the client why and to stop retrying.
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        if self.settling is not None:
            self.settling.cancel()
        if self.stream is not None:
            for group in self.stream.groups:
                await self.channel_layer.group_discard(group, self.channel_name)

    async def audit_events(self, message: dict[str, Any]) -> None:
        """Forward the live events of one committed transaction, in order, from the channel
        layer (``{"type": "audit.events", "events": [...]}``, see ``audit.live``).

        Access is checked again first when ``AGENTOPS_WS_RECHECK_SECONDS`` have passed since
        the last check: a connection whose token was revoked or expired, whose session ended,
        whose user was deactivated, or whose projects changed (a membership or role lost) is
        closed (4401, 4403) instead of going on receiving."""
        if time.monotonic() - self.checked_at >= settings.AGENTOPS_WS_RECHECK_SECONDS:
            now = await database_sync_to_async(self._stream_now)()
            self.checked_at = time.monotonic()
            if now != self.stream:
                await self.close(code=now if isinstance(now, int) else CLOSE_FORBIDDEN)
                return
        async with self.lock:
            for event in message["events"]:
                if event["id"] in self.unsettled or event["id"] in self.passed:
                    continue
                self.unsettled.add(event["id"])
                await self.send_json({"type": "event", "event": event, "after": self.told})
        if self.settling is None or self.settling.done():
            self.settling = asyncio.ensure_future(self._settle())

    def _after(self) -> int | None:
        """The ``after`` query parameter, None when absent; ValueError when not an int >= 0."""
        query = parse_qs(self.scope.get("query_string", b"").decode("latin1"))
        if "after" not in query:
            return None
        after = int(query["after"][0])
        if after < 0:
            raise ValueError("after must not be negative")
        return after

    async def _settle(self) -> None:
        """Catch up shortly after live messages, and again, waiting longer each time, while
        events sent live are still unsettled."""
        delay = SETTLE_DELAY
        while True:
            await asyncio.sleep(delay)
            await self._catch_up()
            if not self.unsettled:
                return
            delay = min(2 * delay, SETTLE_MAX_DELAY)

    async def _catch_up(self) -> None:
        """Send the events after the cursor that ``stream_events`` hands out now (except those
        already sent live), moving the cursor over each, then the cursor itself if the last
        message did not carry it."""
        assert self.stream is not None
        async with self.lock:
            while True:
                batch = await _events_after(self.stream, self.cursor)
                for event in batch:
                    self.cursor = event["id"]
                    self.passed[self.cursor] = None
                    if self.cursor in self.unsettled:
                        self.unsettled.discard(self.cursor)
                    else:
                        self.told = self.cursor
                        await self.send_json({"type": "event", "event": event, "after": self.told})
                if len(batch) < REPLAY_BATCH:
                    break
            while len(self.passed) > RECENT_PASSED:
                del self.passed[next(iter(self.passed))]
            if self.told != self.cursor:
                self.told = self.cursor
                await self.send_json({"type": "cursor", "after": self.told})
