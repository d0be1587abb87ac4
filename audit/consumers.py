"""The base WebSocket consumer of live audit-event streams (runs, one run, approvals).

Protocol: the client connects to a stream URL, optionally with ``?after=<last event id it
saw>``. The server sends every message as JSON ``{"type": "event", "event": {...}}`` where the
event has the shape of ``audit.serializers.AuditEventSerializer`` (the events API's shape):
first the stored events with ``id > after`` in id order (none when ``after`` is absent), then
live ones as they commit. The
client ignores events it has already seen (same id) and reconnects with its last seen id, so
a dropped connection never loses a transition.

Close codes (sent after the handshake, so browsers see them): 4400 bad ``after``, 4401 not
authenticated, 4403 missing permission (or a change of the projects it may follow: reconnect),
4404 unknown object or one in a project the user may not see.

A connection follows only the projects its user (and token) may see when it connects
(``projects.access``): the events of each project go to that project's group.
"""

from __future__ import annotations

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
from audit.selectors import event_list
from audit.serializers import AuditEventSerializer
from projects.access import Access

CLOSE_BAD_REQUEST = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404

# Events read from the database per query while replaying.
REPLAY_BATCH = 500


@dataclass(frozen=True)
class Stream:
    """What a connection follows: channel-layer ``groups`` and the filter selecting the same
    events from the database (``run_id``: one run's; ``verb_prefix``: one verb family;
    ``project_ids``: of these projects only)."""

    groups: tuple[str, ...]
    project_ids: tuple[int, ...]
    run_id: uuid.UUID | None = None
    verb_prefix: str = ""


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
    events = event_list(
        run_id=stream.run_id,
        after=after,
        verb_prefix=stream.verb_prefix,
        project_ids=stream.project_ids,
    )
    return list(AuditEventSerializer(events[:REPLAY_BATCH], many=True).data)


class AuditEventConsumer(AsyncJsonWebsocketConsumer):
    """Authenticate, join the stream's group, replay missed events, then forward live ones.

    Subclasses set ``permission`` (``app_label.codename`` the user needs in a project) and
    implement ``get_stream``.
    """

    permission = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stream: Stream | None = None
        self.replayed: set[int] = set()
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
        if after is not None:
            await self._replay(after)

    async def _refuse(self, code: int) -> None:
        # Accept, then close with the code: a refused handshake reaches browsers as a bare
        # 1006, while a close code tells the client why and to stop retrying.
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
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
        for event in message["events"]:
            if event["id"] not in self.replayed:
                await self.send_json({"type": "event", "event": event})

    def _after(self) -> int | None:
        """The ``after`` query parameter, None when absent; ValueError when not an int >= 0."""
        query = parse_qs(self.scope.get("query_string", b"").decode("latin1"))
        if "after" not in query:
            return None
        after = int(query["after"][0])
        if after < 0:
            raise ValueError("after must not be negative")
        return after

    async def _replay(self, after: int) -> None:
        assert self.stream is not None
        while True:
            batch = await _events_after(self.stream, after)
            for event in batch:
                self.replayed.add(event["id"])
                await self.send_json({"type": "event", "event": event})
            if len(batch) < REPLAY_BATCH:
                return
            after = batch[-1]["id"]
