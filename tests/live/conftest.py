"""Helpers for WebSocket tests: connect to the real ASGI application as a user.

Consumers read the database from another thread, so these tests use real transactions
(``django_db(transaction=True)``); test bodies are async functions run with ``async_to_sync``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from audit import live
from projects.services import project_default
from testsupport.factories import make_run
from web.asgi import application

ORIGIN = (b"origin", b"http://localhost")
# The site the test connections reach: the Origin must match its scheme, host and port.
HOST = (b"host", b"localhost")

SEND_EMAIL = {
    "tool": "send_email",
    "args": {"to": ["ops@example.com"], "subject": "report", "body": "done"},
    "rationale": "the user asked for the report by mail",
}


def session_cookie(user: Any) -> tuple[bytes, bytes]:
    """A ``Cookie`` header carrying a logged-in session of ``user``."""
    client = Client()
    client.force_login(user)
    value = client.cookies[settings.SESSION_COOKIE_NAME].value
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={value}".encode())


def communicator(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    """A WebSocket client of ``web.asgi.application`` with an allowed Origin."""
    return WebsocketCommunicator(application, path, headers=[ORIGIN, HOST, *headers])


async def close_code(comm: WebsocketCommunicator) -> int:
    """Connect and return the code the server closes with (it accepts, then closes); then
    disconnect, as a server would once the socket is closed, so the consumer stops listening
    on the channel layer before the test's event loop closes."""
    connected, code = await comm.connect()
    if connected:
        message = await comm.receive_output(timeout=5)
        assert message["type"] == "websocket.close", message
        code = message["code"]
    await comm.disconnect()
    return int(code)


async def receive_message(comm: WebsocketCommunicator, timeout: float = 10) -> dict:
    """The next message other than a cursor message (``{"type": "cursor", ...}``)."""
    while True:
        message = await comm.receive_json_from(timeout=timeout)
        if message["type"] != "cursor":
            return message


async def receive_events(
    comm: WebsocketCommunicator, until: Callable[[list[dict]], bool], timeout: float = 10
) -> list[dict]:
    """Collect the events the server sends until ``until(events)`` holds (cursor messages are
    skipped)."""
    events: list[dict] = []

    async def collect() -> None:
        while not until(events):
            message = await receive_message(comm, timeout)
            assert message["type"] == "event", message
            events.append(message["event"])

    await asyncio.wait_for(collect(), timeout)
    return events


_markers = itertools.count(1)


def marker() -> dict:
    """An event no commit produces, with an id of its own (a consumer sends an id once): sent
    to a stream's group after everything this process committed, it must be the next one the
    client receives."""
    return {"id": -next(_markers), "verb": "test.marker"}


async def assert_nothing_more(comm: WebsocketCommunicator, group: str) -> None:
    """The client of ``group`` (``audit.live``: ``run.<id>``, or ``runs`` and ``approvals``
    for the default project's groups) is subscribed and gets nothing more than it already
    received: once every event this process committed has gone out, a marker sent to the group
    is the next message it receives (a synchronisation point, not a stretch of silence)."""
    await database_sync_to_async(live.flush)()
    if group in ("runs", "approvals"):
        project = await database_sync_to_async(project_default)()
        group = live.runs_group(project.pk) if group == "runs" else live.approvals_group(project.pk)
    sent = marker()
    await get_channel_layer().group_send(group, {"type": "audit.events", "events": [sent]})
    message = await receive_message(comm)
    assert (message["type"], message["event"]) == ("event", sent), message


def create_run(user: Any, steps: list[dict], project: Any = None) -> Any:
    """A plan run created (and advanced, Celery being eager) through the service in
    ``project`` (default: the default project); its events are all sent before this returns,
    so a client connecting next gets none of them live."""
    run = make_run(user, goal="live test", steps=steps, project=project)
    live.flush()
    return run


acreate_run = database_sync_to_async(create_run)


@pytest.fixture
def live_db(transactional_db: None, seeded: None) -> None:
    """A database with real commits (consumers read it from their own thread)."""
