"""Who may open a live stream: session or token users with the right permission."""

import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from audit.live import runs_group
from projects.models import ApiToken
from projects.services import project_default
from tests.live.conftest import (
    ORIGIN,
    assert_nothing_more,
    close_code,
    communicator,
    marker,
    session_cookie,
)
from testsupport.factories import make_token, make_user
from web.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("live_db")]


def test_unauthenticated_connection_is_closed_with_4401():
    async def scenario():
        for path in ["/ws/runs/", "/ws/approvals/", f"/ws/runs/{uuid.uuid4()}/"]:
            assert await close_code(communicator(path)) == 4401

    async_to_sync(scenario)()


def test_unknown_token_is_not_authenticated(operator):
    cookie = session_cookie(operator)

    async def scenario():
        # A wrong token is refused even alongside a valid session: no silent identity swap.
        assert await close_code(communicator("/ws/runs/?token=nope", cookie)) == 4401

    async_to_sync(scenario)()


def test_user_without_permission_is_closed_with_4403(seeded):
    cookie = session_cookie(make_user("nobody"))

    async def scenario():
        assert await close_code(communicator("/ws/runs/", cookie)) == 4403
        assert await close_code(communicator("/ws/approvals/", cookie)) == 4403

    async_to_sync(scenario)()


def test_unknown_run_is_closed_with_4404(operator):
    operator_cookie = session_cookie(operator)

    async def scenario():
        path = f"/ws/runs/{uuid.uuid4()}/"
        assert await close_code(communicator(path, operator_cookie)) == 4404

    async_to_sync(scenario)()


def test_malformed_after_is_closed_with_4400(operator):
    operator_cookie = session_cookie(operator)

    async def scenario():
        comm = communicator("/ws/runs/?after=yesterday", operator_cookie)
        assert await close_code(comm) == 4400

    async_to_sync(scenario)()


def test_foreign_origin_is_refused(operator):
    operator_cookie = session_cookie(operator)

    async def scenario():
        comm = communicator("/ws/runs/", operator_cookie)
        comm.scope["headers"] = [
            (b"origin", b"http://evil.example") if name == ORIGIN[0] else (name, value)
            for name, value in comm.scope["headers"]
        ]
        connected, _ = await comm.connect()
        # Tell the refused consumer the socket is gone, as a server would: it stops
        # listening on the channel layer before this loop closes.
        await comm.disconnect()
        assert not connected

    async_to_sync(scenario)()


@pytest.mark.parametrize("where", ["query", "header"])
def test_api_token_authenticates(operator, where):
    key = make_token(operator)

    async def scenario():
        if where == "query":
            comm = communicator(f"/ws/runs/?token={key}")
        else:
            comm = communicator("/ws/runs/", (b"authorization", f"Token {key}".encode()))
        # Refused connections are accepted, then closed: only a delivered message proves one
        # was let in.
        assert (await comm.connect())[0]
        await assert_nothing_more(comm, "runs")
        await comm.disconnect()

    async_to_sync(scenario)()


def test_session_authenticates(reviewer):
    reviewer_cookie = session_cookie(reviewer)

    async def scenario():
        comm = communicator("/ws/approvals/", reviewer_cookie)
        assert (await comm.connect())[0]
        await assert_nothing_more(comm, "approvals")
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_token_client_needs_no_origin(operator):
    key = make_token(operator)

    async def scenario():
        comm = WebsocketCommunicator(
            application, "/ws/runs/", headers=[(b"authorization", f"Token {key}".encode())]
        )
        assert (await comm.connect())[0]
        await assert_nothing_more(comm, "runs")
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_session_without_origin_is_refused(operator):
    operator_cookie = session_cookie(operator)

    async def scenario():
        comm = WebsocketCommunicator(application, "/ws/runs/", headers=[operator_cookie])
        connected, _ = await comm.connect()
        # Tell the refused consumer the socket is gone, as a server would: it stops
        # listening on the channel layer before this loop closes.
        await comm.disconnect()
        assert not connected

    async_to_sync(scenario)()


@pytest.mark.parametrize(
    "origin",
    [
        b"http://localhost:8081",  # another port of the same host
        b"https://localhost",  # another scheme
        b"http://localhost.evil.example",
        b"null",
        b"http://[::1",  # does not parse
    ],
)
def test_an_origin_that_is_not_exactly_this_site_is_refused(operator, origin):
    operator_cookie = session_cookie(operator)

    async def scenario():
        comm = communicator("/ws/runs/", operator_cookie)
        comm.scope["headers"] = [
            (b"origin", origin) if name == ORIGIN[0] else (name, value)
            for name, value in comm.scope["headers"]
        ]
        connected, _ = await comm.connect()
        # Tell the refused consumer the socket is gone, as a server would: it stops
        # listening on the channel layer before this loop closes.
        await comm.disconnect()
        assert not connected

    async_to_sync(scenario)()


def test_a_proxy_that_terminates_tls_is_believed_only_when_configured(operator, settings):
    operator_cookie = session_cookie(operator)

    async def connects(*extra: tuple[bytes, bytes]) -> bool:
        comm = communicator("/ws/runs/", operator_cookie, *extra)
        comm.scope["headers"] = [
            (b"origin", b"https://localhost") if name == ORIGIN[0] else (name, value)
            for name, value in comm.scope["headers"]
        ]
        connected, _ = await comm.connect()
        # Tell the refused consumer the socket is gone, as a server would: it stops
        # listening on the channel layer before this loop closes.
        await comm.disconnect()
        await comm.disconnect()
        return bool(connected)

    forwarded = (b"x-forwarded-proto", b"https")
    settings.SECURE_PROXY_SSL_HEADER = None
    assert not async_to_sync(connects)(forwarded)
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert async_to_sync(connects)(forwarded)
    assert not async_to_sync(connects)()


@pytest.mark.parametrize("revoke", ["token deleted", "user deactivated", "permission removed"])
def test_an_open_stream_closes_once_its_access_is_revoked(operator, settings, revoke):
    settings.AGENTOPS_WS_RECHECK_SECONDS = 0
    key = make_token(operator)
    token = ApiToken.objects.get()
    group = runs_group(project_default().pk)

    async def scenario():
        comm = communicator(f"/ws/runs/?token={key}")
        assert (await comm.connect())[0]
        await assert_nothing_more(comm, "runs")
        await database_sync_to_async(_revoke)(revoke, token, operator)
        # The next event does not reach it: the connection closes with why.
        await get_channel_layer().group_send(group, {"type": "audit.events", "events": [marker()]})
        message = await comm.receive_output(timeout=10)
        assert message == {
            "type": "websocket.close",
            "code": 4403 if revoke == "permission removed" else 4401,
        }

    async_to_sync(scenario)()


def _revoke(revoke: str, token: ApiToken, user) -> None:
    if revoke == "token deleted":
        token.delete()
    elif revoke == "user deactivated":
        type(user).objects.filter(pk=user.pk).update(is_active=False)
    else:
        user.memberships.all().delete()
