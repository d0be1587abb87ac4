"""Outages of a service a request can do without (the shared cache, the broker): logged when
they begin and when they end, never once per request, and not tried again for a moment after
each failure, so the requests meanwhile do not each wait on a connection attempt."""

from __future__ import annotations

import logging
import threading
import time

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

# What redis-py (and so Django's cache and channels-redis) raises when Redis cannot be reached:
# a refused or dropped connection, a timeout.
REDIS_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)


class Outage:
    """The state of ``service`` (words for the logs, with no credentials) as this process saw
    it: an outage begins at the first failure (logged once, a warning with the error and
    ``consequence``: what goes without it) and ends at the next success (logged once, with
    how long it lasted). For ``retry_seconds`` after each failure ``skipping()`` is true: the
    caller does without the service instead of trying it again."""

    def __init__(self, service: str, consequence: str, *, retry_seconds: float = 2.0) -> None:
        self.service = service
        self.consequence = consequence
        self.retry_seconds = retry_seconds
        self._lock = threading.Lock()
        self._since: float | None = None  # time.monotonic() of the outage's first failure
        self._retry_at = 0.0

    def skipping(self) -> bool:
        """Whether the service failed less than ``retry_seconds`` ago."""
        return self._since is not None and time.monotonic() < self._retry_at

    def failed(self, error: BaseException) -> None:
        """The service could not be reached (``error``): begins the outage (logged) unless
        one is going on."""
        now = time.monotonic()
        with self._lock:
            self._retry_at = now + self.retry_seconds
            if self._since is not None:
                return
            self._since = now
        logger.warning(
            "%s is unreachable (%s: %s); until it is back %s",
            self.service,
            type(error).__name__,
            error,
            self.consequence,
        )

    def reached(self) -> None:
        """The service answered: ends the outage (logged), if one is going on."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            lasted = time.monotonic() - since
            logger.warning("%s is reachable again after %.0f s", self.service, lasted)
