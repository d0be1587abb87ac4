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


# Programs whose first argument names what they do (``manage.py migrate``).
_COMMAND_RUNNERS = ("manage.py", "django-admin", "django")


def process_name() -> str:
    """What the system actor of this process is called in audit events: the program it was
    started as, whatever the launcher: ``celery`` for ``celery ...`` and ``python -m celery
    ...`` alike (a module run with ``-m`` is named after its package, not its
    ``__main__.py``), ``manage.py migrate`` and ``django migrate`` with the command of a
    Django command runner, ``python`` for ``python -c`` or an interactive session. At most 150
    characters."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        name = spec.name.removesuffix(".__main__")
    elif sys.argv and sys.argv[0] not in ("", "-c"):
        name = os.path.basename(sys.argv[0])
    else:
        name = "python"
    if name in _COMMAND_RUNNERS and len(sys.argv) > 1:
        name = f"{name} {sys.argv[1]}"
    return name[:150]


def current_actor() -> Actor:
    """The request's authenticated user (``via_api`` when a token authenticated it), an
    anonymous user of a request, or the system named after the process (``manage.py
    createsuperuser``, ``celery``) outside requests."""
    request = _request.get()
    if request is None:
        return Actor.system(process_name())
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Actor.for_user(user, via_api=getattr(request, "auth", None) is not None)
    return Actor(kind=ActorKind.USER, name="anonymous")
