"""Who may use the gateway: the upstream a request names, and the caller its API token stands for.

Checking a request in the database takes three queries (the upstream, the token with its user,
the user's memberships), and an MCP client sends the same token with every request. So each
process keeps what it found for a token (the upstream, the caller, the token's expiry) and
admits the token's next requests without the database while the credentials version in the
shared cache (``agentops.tokens.CREDENTIALS``, the REST API's) is the one it found them under
and the token has not expired. Saving or deleting a token, a membership or a user replaces the
version (``ProjectsConfig.ready``), and so does saving or deleting an upstream
(``GatewayConfig.ready``): a revoked token, a changed role, a deactivated user or a disabled
upstream is refused from the next request on; a change made around Django (SQL,
``QuerySet.update``) must call ``agentops.tokens.credentials_changed``. Without the shared
cache (Redis down) every request is checked in the database.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed

from agentops import bad_tokens
from agentops.actors import Actor
from agentops.tokens import CREDENTIALS, TokenAuthentication
from gateway.models import Upstream
from projects.access import Access

# What a token's user must hold in its project to use the gateway: a session is a run they
# create, each call a step they append.
NEEDED = ("runs.add_run", "runs.drive_run")
_REMEMBERED = 10_000


@dataclass(frozen=True)
class Caller:
    """Who is calling: the ``actor`` recorded on runs and steps (the token's user), and the
    token's project. The pair owns the MCP sessions it opens (``gateway.calls``).
    ``token_grant`` is the token's tool grant (``agentops.grants``; None: none), fixed when
    the token was made."""

    actor: Actor
    project_id: int
    token_grant: dict[str, Any] | None = None


@dataclass(frozen=True)
class Admitted:
    """A request let in: the ``upstream`` it names and its ``caller``."""

    upstream: Upstream
    caller: Caller


Refused = tuple[int, str, list[tuple[bytes, bytes]]]
_UNAUTHENTICATED: Refused = (
    401,
    "an agentops API token is required",
    [(b"www-authenticate", b'Bearer realm="agentops"')],
)


@dataclass(frozen=True)
class _Kept:
    version: str
    admitted: Admitted
    expiry: datetime | None


# (upstream name, digest of the Authorization header) -> what the database said, under which
# version (bounded: the oldest entries are forgotten first).
_kept: dict[tuple[str, str], _Kept] = {}


def admit(name: str, authorization: str, address: str) -> Admitted | Refused:
    """The upstream ``name`` (an enabled one) and the caller of ``authorization`` (``Bearer
    <token>`` or ``Token <token>``: an API token whose user holds ``NEEDED`` in the token's
    project) from the client ``address``, or the refusal to answer as ``(HTTP status, detail,
    extra headers)``: 404 (no such enabled upstream, or another project's), 401 (no valid
    token), 429 (too many bad tokens of this prefix from this address:
    ``agentops.bad_tokens``, the REST API's limit), 403 (no role to run tools)."""
    key = (name, hashlib.sha256(authorization.encode()).hexdigest())
    version = CREDENTIALS.current()
    kept = _kept.get(key)
    if (
        kept is not None
        and version is not None
        and kept.version == version
        and (kept.expiry is None or kept.expiry > timezone.now())
    ):
        return kept.admitted
    _kept.pop(key, None)
    found, expiry = _admit_from_database(name, authorization, address)
    if version is not None and isinstance(found, Admitted):
        if len(_kept) >= _REMEMBERED:
            del _kept[next(iter(_kept))]
        _kept[key] = _Kept(version, found, expiry)
    return found


def _admit_from_database(
    name: str, authorization: str, address: str
) -> tuple[Admitted | Refused, datetime | None]:
    """What the database says of the request, and the token's expiry when it is admitted."""
    upstream = Upstream.objects.filter(name=name, enabled=True).first()
    if upstream is None:
        return (404, f"no MCP upstream {name!r}", []), None
    keyword, _, key = authorization.partition(" ")
    presented = key.strip().encode("latin1")  # the header's bytes (``Gateway`` decoded them)
    if keyword.lower() not in ("bearer", "token") or not presented:
        return _UNAUTHENTICATED, None
    if bad_tokens.refused(address, presented):
        wait = str(bad_tokens.WINDOW_SECONDS).encode()
        return (429, "too many bad tokens from this address", [(b"retry-after", wait)]), None
    found = _authenticate(presented)
    if found is None:
        bad_tokens.failed(address, presented)
        return _UNAUTHENTICATED, None
    user, token = found
    if upstream.project_id not in (None, token.project_id):
        # Another project's upstream: answered as one that does not exist.
        return (404, f"no MCP upstream {name!r}", []), None
    access = Access.of(user, token)
    if not all(access.can(perm, token.project_id) for perm in NEEDED):
        return (403, "your role in this project cannot run tools", []), None
    caller = Caller(Actor.for_user(user, via_api=True), token.project_id, token.grant)
    return Admitted(upstream, caller), token.expiry


def _authenticate(token: bytes) -> tuple[Any, Any] | None:
    try:
        return TokenAuthentication().authenticate_credentials(token)
    except AuthenticationFailed:
        return None
