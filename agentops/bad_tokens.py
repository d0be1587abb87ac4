"""The bad-token limit: API tokens cannot be guessed at speed, and a valid token is never
refused because of someone else's failures.

Failures are counted per client address (``agentops.addresses``) and token prefix: the first
``TOKEN_KEY_LENGTH`` (15) characters of what was presented, django-rest-knox's ``token_key``.
That is the part of a token knox stores in clear and finds a token by; the rest (49 hex
digits, 196 bits) is only compared through its digest. So the failures counted together are
guesses at one stored token from one place, or a client resending its revoked token, and a
valid token is refused only after ``AGENTOPS_BAD_TOKENS_PER_MINUTE`` failures from its own
address with its own key, which only someone holding its first 15 characters can send.
Counting by address alone refused every valid token behind the same proxy or NAT as a
guesser (issue 29). A client presenting random tokens gets a new prefix each time and is not
limited: each such guess costs one indexed lookup that finds nothing, and a token cannot be
found that way.

A counted key is refused from its limit to the end of its minute (a fixed window opened by its
first failure), before the token is looked at. The REST API (``agentops.tokens``), the MCP
gateway (``gateway.admission``) and WebSockets (``agentops.ws_auth``) share the counts, kept
in the shared cache: while it cannot be reached nothing is counted or refused.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache
from knox.settings import CONSTANTS

WINDOW_SECONDS = 60


def _key(address: str, token: bytes) -> str:
    prefix = token[: CONSTANTS.TOKEN_KEY_LENGTH]
    return "bad-tokens:" + hashlib.sha256(address.encode() + b"\0" + prefix).hexdigest()


def refused(address: str, token: bytes) -> bool:
    """Whether ``token`` (as presented: bytes, possibly malformed) from the client ``address``
    is to be refused unchecked: its address and prefix reached the limit this minute."""
    return (cache.get(_key(address, token)) or 0) >= settings.AGENTOPS_BAD_TOKENS_PER_MINUTE


def failed(address: str, token: bytes) -> None:
    """Count one failure of ``token`` from ``address``."""
    key = _key(address, token)
    if not cache.add(key, 1, timeout=WINDOW_SECONDS):
        try:
            cache.incr(key)
        except ValueError:  # the window ended between add and incr
            cache.add(key, 1, timeout=WINDOW_SECONDS)
