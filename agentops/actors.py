"""Who did a change: the actor recorded in audit events."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


class ActorKind(models.TextChoices):
    """What kind of author a change has: a person in the browser, a client app (token), a
    Celery worker or the system (scheduled work)."""

    USER = "user", "User"
    API_CLIENT = "api_client", "API client"
    WORKER = "worker", "Worker"
    SYSTEM = "system", "System"


@dataclass(frozen=True)
class Actor:
    """The author of a change, copied by value into audit events.

    ``kind`` is an ``ActorKind``; ``id`` the user's primary key, a worker's ``host:pid`` or
    empty for the system; ``name`` a display name; ``user`` the live user object when the actor
    is a person (used for permission checks, never stored).
    """

    kind: str
    id: str = ""
    name: str = ""
    user: Any = None

    @classmethod
    def for_user(cls, user: AbstractBaseUser | AnonymousUser, *, via_api: bool = False) -> Actor:
        """A person acting in the browser, or a client app when ``via_api`` (token auth)."""
        kind = ActorKind.API_CLIENT if via_api else ActorKind.USER
        return cls(kind=kind, id=str(user.pk), name=user.get_username(), user=user)

    @classmethod
    def worker(cls) -> Actor:
        """The Celery worker process running this code, named ``host:pid``."""
        ident = f"{socket.gethostname()}:{os.getpid()}"
        return cls(kind=ActorKind.WORKER, id=ident, name=ident)

    @classmethod
    def system(cls, name: str = "system") -> Actor:
        """Scheduled or internal work with no person behind it (sweeper, retention)."""
        return cls(kind=ActorKind.SYSTEM, name=name)
