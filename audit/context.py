"""Who is acting in the current context, for audit events recorded by signal receivers and
other code that is not handed an ``Actor``: the user of the request being served (set by
``audit.middleware.AuditActorMiddleware``), else the process itself."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from agentops.actors import Actor, ActorKind
from agentops.addresses import request_address

_request: ContextVar[Any] = ContextVar("audit_request", default=None)


@contextmanager
def acting_request(request: Any) -> Iterator[None]:
    """Make ``request`` (a Django ``HttpRequest``) the source of ``current_actor`` inside the
    block."""
    token = _request.set(request)
    try:
        yield
    finally:
        _request.reset(token)


def client_ip(request: Any) -> str:
    """The client's address of the request (behind trusted proxies too:
    ``agentops.addresses``), or "" without a request."""
    return request_address(request) if request is not None and hasattr(request, "META") else ""


def _process_name() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    if name in ("manage.py", "django-admin") and len(sys.argv) > 1:
        name = f"{name} {sys.argv[1]}"
    return name[:150]


def current_actor() -> Actor:
    """The request's authenticated user (``via_api`` when a token authenticated it), an
    anonymous user of a request, or the system named after the process (``manage.py
    createsuperuser``, ``celery``) outside requests."""
    request = _request.get()
    if request is None:
        return Actor.system(_process_name())
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Actor.for_user(user, via_api=getattr(request, "auth", None) is not None)
    return Actor(kind=ActorKind.USER, name="anonymous")
