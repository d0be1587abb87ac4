"""API token authentication: django-rest-knox's hashed tokens, throttled on failures.

Its own module because DRF imports authentication classes while it loads its settings, before
its views can be imported (``agentops.api`` imports them).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.settings import knox_settings
from rest_framework import exceptions


def client_address(request: Any) -> str:
    """The client's IP address as the web server saw it (``REMOTE_ADDR``)."""
    return str(request.META.get("REMOTE_ADDR", ""))


_TOKEN_SHAPE = re.compile(rb"[0-9a-f]{%d}" % knox_settings.AUTH_TOKEN_CHARACTER_LENGTH)


class TokenAuthentication(KnoxTokenAuthentication):
    """``Authorization: Token <token>``: django-rest-knox's hashed tokens (``KNOX_TOKEN_MODEL``)
    with two changes.

    - A client address that sent ``AGENTOPS_BAD_TOKENS_PER_MINUTE`` bad tokens within a
      minute is answered 429 until that minute ends, before any token is checked: a token
      cannot be guessed at speed (DRF's throttles run after authentication, too late for this).
    - An expired token is refused and deleted; other tokens are left to retention instead of
      being scanned on every request (knox's clean-up reads all the user's tokens each time).
    """

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        key = f"bad-tokens:{client_address(request)}"
        if (cache.get(key) or 0) >= settings.AGENTOPS_BAD_TOKENS_PER_MINUTE:
            raise exceptions.Throttled(detail="too many bad tokens from this address")
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            if cache.add(key, 1, timeout=60) is False:
                try:
                    cache.incr(key)
                except ValueError:  # expired between add and incr
                    cache.add(key, 1, timeout=60)
            raise

    def authenticate_credentials(self, token: bytes) -> tuple[Any, Any]:
        """Knox's check, after refusing anything that is not a token's shape (hex digits of
        ``AUTH_TOKEN_CHARACTER_LENGTH``): malformed bytes never reach the database."""
        if not _TOKEN_SHAPE.fullmatch(token):
            raise exceptions.AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(token)

    def _cleanup_token(self, auth_token: Any) -> bool:
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False
