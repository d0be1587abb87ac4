"""WebSocket authentication: the browser's session, or a client app's API token.

A client app passes its DRF token (``rest_framework.authtoken``) either as ``?token=<key>`` in
the URL (browsers' WebSocket API cannot set headers) or as an ``Authorization: Token <key>``
header. A connection that presents a token is authenticated by that token alone: an unknown
token leaves the user anonymous even when a session cookie is also sent, so a wrong key is
never silently replaced by another identity.

Origins: a browser sends its session cookie with any page's WebSocket, so a connection
authenticated by cookie must come from one of ``ALLOWED_HOSTS`` (cross-site WebSocket
hijacking); a connection presenting a token proves itself and may come from anywhere, including
clients that send no ``Origin`` at all.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import AllowedHostsOriginValidator
from django.contrib.auth.models import AnonymousUser
from rest_framework.authtoken.models import Token

TOKEN_KEYWORD = b"token"


def token_key(scope: dict[str, Any]) -> str:
    """The token key a connection presents (query string first, then header), or ``""``."""
    query = parse_qs(scope.get("query_string", b"").decode("latin1"))
    if query.get("token"):
        return query["token"][0]
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            keyword, _, key = value.partition(b" ")
            if keyword.lower() == TOKEN_KEYWORD and key.strip():
                return key.strip().decode("latin1")
    return ""


@database_sync_to_async
def user_for_token(key: str) -> Any:
    """The active user owning token ``key``, or ``AnonymousUser``."""
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return AnonymousUser()
    return token.user


class TokenAuthMiddleware(BaseMiddleware):
    """Set ``scope["user"]`` from an API token when the connection presents one."""

    async def __call__(self, scope, receive, send):
        scope = dict(scope)
        key = token_key(scope)
        if key:
            scope["user"] = await user_for_token(key)
        return await super().__call__(scope, receive, send)


def TokenAuthMiddlewareStack(inner):
    """Session authentication (channels' ``AuthMiddlewareStack``) overridden by token auth."""
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))


class SessionOriginValidator:
    """Check the ``Origin`` (``AllowedHostsOriginValidator``) unless the connection presents a
    token: only cookie-authenticated connections can be hijacked from another site."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.validated = AllowedHostsOriginValidator(inner)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if token_key(scope):
            return await self.inner(scope, receive, send)
        return await self.validated(scope, receive, send)
