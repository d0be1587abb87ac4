"""WebSocket authentication: the browser's session, or a client app's API token.

A client app passes its API token (``agentops.tokens``: hashed, expiring, project-scoped;
``scope["auth"]`` holds the stored token) either as ``?token=<key>`` in
the URL (browsers' WebSocket API cannot set headers) or as an ``Authorization: Token <key>``
header. A connection that presents a token is authenticated by that token alone: an unknown
token leaves the user anonymous even when a session cookie is also sent, so a wrong key is
never silently replaced by another identity.

Origins: a browser sends its session cookie with any page's WebSocket, so a connection
authenticated by cookie must come from this very site: its ``Origin`` must equal the site's
scheme, host (one of ``ALLOWED_HOSTS``) and port (cross-site WebSocket hijacking, including
from another port or plain http of the same host); a connection presenting a token proves
itself and may come from anywhere, including clients that send no ``Origin`` at all.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import split_domain_port, validate_host
from rest_framework.exceptions import AuthenticationFailed

from agentops import bad_tokens
from agentops.addresses import scope_address
from agentops.tokens import TokenAuthentication

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


def user_for_token(key: str, address: str) -> tuple[Any, Any]:
    """(the active user owning token ``key``, the stored token), or (``AnonymousUser``, None)
    for a wrong, expired or revoked token or an inactive user, and, unchecked, for a token
    over the bad-token limit of the client ``address`` (``agentops.bad_tokens``, the REST
    API's limit, whose counts it adds to)."""
    token = key.encode()
    if bad_tokens.refused(address, token):
        return AnonymousUser(), None
    try:
        return TokenAuthentication().authenticate_credentials(token)
    except AuthenticationFailed:
        bad_tokens.failed(address, token)
        return AnonymousUser(), None


class TokenAuthMiddleware(BaseMiddleware):
    """Set ``scope["user"]`` and ``scope["auth"]`` from an API token when the connection
    presents one."""

    async def __call__(self, scope, receive, send):
        scope = dict(scope)
        key = token_key(scope)
        if key:
            found = database_sync_to_async(user_for_token)
            scope["user"], scope["auth"] = await found(key, scope_address(scope))
        return await super().__call__(scope, receive, send)


def TokenAuthMiddlewareStack(inner):
    """Session authentication (channels' ``AuthMiddlewareStack``) overridden by token auth."""
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin or ``host[:port]`` with a scheme, None when it does
    not parse."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin1")
    return ""


def own_origin(scope: dict[str, Any]) -> tuple[str, str, int] | None:
    """This site's origin as the browser sees it: https when the connection is wss (or a
    proxy says so through ``SECURE_PROXY_SSL_HEADER``), else http; the ``Host`` header's host
    and port. None without a valid host among ``ALLOWED_HOSTS``."""
    host = _header(scope, b"host")
    if not host or not validate_host(split_domain_port(host)[0], settings.ALLOWED_HOSTS):
        return None
    secure = scope.get("scheme") == "wss"
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name = proxy[0].removeprefix("HTTP_").lower().replace("_", "-").encode()
        secure = secure or _header(scope, name) == proxy[1]
    return _origin(f"{'https' if secure else 'http'}://{host}")


class SessionOriginValidator:
    """Refuse a cookie-authenticated connection whose ``Origin`` is not exactly this site's
    (scheme, host and port; cross-site WebSocket hijacking), before it is accepted. A
    connection that presents a token proves itself and needs no ``Origin``."""

    def __init__(self, inner: Any):
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if token_key(scope):
            return await self.inner(scope, receive, send)
        mine = own_origin(scope)
        origin = _origin(_header(scope, b"origin"))
        if mine is None or origin is None or origin != mine:
            return await WebsocketDenier()(scope, receive, send)
        return await self.inner(scope, receive, send)
