"""API token authentication: django-rest-knox's hashed tokens, throttled on failures, and kept
per process while the credentials do not change.

Checking a token in the database is a query for the token and its user (knox), the permission
check that follows reads the user's memberships, and creating anything reads the token's
project: a client sends the same token with every request. So each process keeps, per token (a
SHA-256 of it), the user and the token the database gave, and the token's project (read when
the token is first used again), and uses them again while the credentials version in the shared
cache (``CREDENTIALS``) is the one they were read under and the token has not expired; the
memberships that ``projects.access`` keeps on the user object are kept with it (each request
gets its own copies of the user, token and project, without the model permissions Django cached
on the user). Saving or deleting a token, a membership, a user or a project (the ORM, admin,
services) replaces the version at once and again when its transaction commits
(``credentials_changed``, connected in ``ProjectsConfig.ready``), so a revoked or rotated
token, a changed role, a deactivated user or a renamed project is seen from the next request
on; a change made around Django (SQL, ``QuerySet.update``) must call ``credentials_changed``
too. Without the shared cache (Redis down) every request is checked in the database. The MCP
gateway's admission (``gateway.admission``) keeps what it checked under the same version.

Its own module because DRF imports authentication classes while it loads its settings, before
its views can be imported (``agentops.api`` imports them).
"""

from __future__ import annotations

import copy
import hashlib
import re
import threading
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.settings import knox_settings
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header

from agentops import bad_tokens
from agentops.addresses import request_address
from agentops.versions import SharedVersion

# The version of what checking a credential reads: tokens, users, memberships (and the
# gateway's upstreams).
CREDENTIALS = SharedVersion("credentials-version")
# Tokens kept per process (bounded: the oldest are forgotten first, and checked again if they
# come back).
_REMEMBERED = 10_000


def credentials_changed(**_: object) -> None:
    """Make every process check credentials in the database again (a signal receiver: any
    keyword arguments are ignored): now, and again once this transaction commits, for the
    requests checked before the change was committed."""
    CREDENTIALS.replace()


@dataclass(frozen=True)
class _Checked:
    version: str
    user: Any
    token: Any


# SHA-256 of a token -> what the database said of it, under which version.
_checked: dict[str, _Checked] = {}
_checked_lock = threading.Lock()


def _expired(token: Any) -> bool:
    return token.expiry is not None and token.expiry <= timezone.now()


# What Django's ModelBackend caches on a user object for the rest of a request: model
# permissions, which group changes alter without saving the user, so they must not outlive it.
_REQUEST_CACHES = ("_perm_cache", "_user_perm_cache", "_group_perm_cache")


def _for_this_request(kept: _Checked, *, with_project: bool) -> tuple[Any, Any]:
    """Copies of the kept user and token, and of the token's project when it is read already
    or ``with_project`` (then read now, once: kept with the token from then on), so that what
    a request caches on them or changes in them stays with it (but the memberships
    ``projects.access`` kept on the first request's user: the credentials version covers
    them)."""
    user = copy.copy(kept.user)
    for name in _REQUEST_CACHES:
        user.__dict__.pop(name, None)
    token = copy.copy(kept.token)
    token.user = user
    if with_project or type(kept.token).project.is_cached(kept.token):
        token.project = copy.copy(kept.token.project)
    return user, token


_TOKEN_SHAPE = re.compile(rb"[0-9a-f]{%d}" % knox_settings.AUTH_TOKEN_CHARACTER_LENGTH)


def _presented(request: Any) -> bytes | None:
    """What follows ``Token`` in the request's ``Authorization`` header (knox's reading of
    it), ``b""`` when nothing or more than one word does; None without such a header."""
    words = get_authorization_header(request).split()
    if not words or words[0].lower() != knox_settings.AUTH_HEADER_PREFIX.lower().encode():
        return None
    return words[1] if len(words) == 2 else b""


class TokenAuthentication(KnoxTokenAuthentication):
    """``Authorization: Token <token>``: django-rest-knox's hashed tokens (``KNOX_TOKEN_MODEL``)
    with two changes.

    - A token whose client address and prefix failed ``AGENTOPS_BAD_TOKENS_PER_MINUTE`` times
      within a minute is answered 429 until that minute ends, before it is checked
      (``agentops.bad_tokens``): a token cannot be guessed at speed (DRF's throttles run
      after authentication, too late for this), and other clients' failures never refuse a
      valid token.
    - An expired token is refused and deleted; other tokens are left to retention instead of
      being scanned on every request (knox's clean-up reads all the user's tokens each time).
    """

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        token = _presented(request)
        if token is None:
            return None
        address = request_address(request)
        if bad_tokens.refused(address, token):
            raise exceptions.Throttled(
                wait=bad_tokens.WINDOW_SECONDS, detail="too many bad tokens from this address."
            )
        try:
            if not token:  # not one word after the prefix: knox refuses it in its own words
                return super().authenticate(request)
            # An API request that creates anything needs the token's project: kept with it.
            return self._check(token, with_project=True)
        except exceptions.AuthenticationFailed:
            bad_tokens.failed(address, token)
            raise

    def authenticate_credentials(self, token: bytes) -> tuple[Any, Any]:
        """Knox's check, after refusing anything that is not a token's shape (hex digits of
        ``AUTH_TOKEN_CHARACTER_LENGTH``): malformed bytes never reach the database. What it
        found is used again, without the database, while the credentials version is the same
        and the token has not expired (see the module docstring).

        Raises:
            AuthenticationFailed: no such token, an expired one, or its user is inactive.
        """
        return self._check(token, with_project=False)

    def _check(self, token: bytes, *, with_project: bool) -> tuple[Any, Any]:
        """``authenticate_credentials``; a kept token comes with its project when
        ``with_project`` (the MCP gateway and WebSockets never need it)."""
        if not _TOKEN_SHAPE.fullmatch(token):
            raise exceptions.AuthenticationFailed("Invalid token.")
        key = hashlib.sha256(token).hexdigest()
        version = CREDENTIALS.current()
        kept = _checked.get(key)
        if kept is not None and kept.version == version and not _expired(kept.token):
            return _for_this_request(kept, with_project=with_project)
        user, auth_token = super().authenticate_credentials(token)
        if version is not None:
            with _checked_lock:
                _checked.pop(key, None)
                if len(_checked) >= _REMEMBERED:
                    del _checked[next(iter(_checked))]
                _checked[key] = _Checked(version, user, auth_token)
        return user, auth_token

    def _cleanup_token(self, auth_token: Any) -> bool:
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False
