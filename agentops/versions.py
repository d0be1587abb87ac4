"""Versions in the shared cache (Redis) that tell every process when what it keeps in memory
is stale: a token, replaced whenever the data it stands for changes. The risk rules
(``approvals.risk``), the API tokens checked (``agentops.tokens``) and the gateway's admitted
requests (``gateway.admission``) are kept so."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from django.core.cache import cache
from django.db import transaction

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SharedVersion:
    """The version of ``what`` (words for the logs) under the cache key ``key``."""

    key: str
    what: str

    def current(self) -> str | None:
        """The version now (set to a new one when the cache has none); None when the cache
        cannot be reached: then nothing kept may be trusted."""
        try:
            version = cache.get(self.key)
            if version is None:
                cache.add(self.key, uuid.uuid4().hex, timeout=None)
                version = cache.get(self.key)
        except Exception:
            logger.warning("%s read without the shared cache", self.what, exc_info=True)
            return None
        return str(version) if version is not None else None

    def replace(self) -> None:
        """Replace the version now (for this transaction's own later reads) and again once
        the transaction commits (for the processes that read before the change committed).
        A cache that cannot be reached is logged, not raised."""

        def bump() -> None:
            try:
                cache.set(self.key, uuid.uuid4().hex, timeout=None)
            except Exception:
                logger.error("could not publish a change of %s", self.what, exc_info=True)

        bump()
        transaction.on_commit(bump)
