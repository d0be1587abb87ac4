"""Versions in the shared cache (Redis) that tell every process when what it keeps in memory
is stale: a token, replaced whenever the data it stands for changes. The risk rules
(``approvals.risk``), the API tokens checked (``agentops.tokens``) and the gateway's admitted
requests (``gateway.admission``) are kept so."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.core.cache import cache
from django.db import transaction


@dataclass(frozen=True)
class SharedVersion:
    """The version of what the cache key ``key`` stands for."""

    key: str

    def current(self) -> str | None:
        """The version now (set to a new one when the cache has none); None when the cache
        cannot be reached (it keeps nothing then: ``agentops.cache``): then nothing kept may
        be trusted."""
        version = cache.get(self.key)
        if version is None:
            cache.add(self.key, uuid.uuid4().hex, timeout=None)
            version = cache.get(self.key)
        return str(version) if version is not None else None

    def replace(self) -> None:
        """Replace the version now (for this transaction's own later reads) and again once
        the transaction commits (for the processes that read before the change committed).
        While the cache cannot be reached this is lost (the cache logs its outage)."""

        def bump() -> None:
            cache.set(self.key, uuid.uuid4().hex, timeout=None)

        bump()
        transaction.on_commit(bump)
