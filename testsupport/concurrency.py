"""Running calls at the same moment from several threads, each with its own DB connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

# How long each call may take before the race counts as hung (seconds).
JOIN_SECONDS = 60


def run_together(
    calls: list[Callable[[], Any]], *, expected: tuple[type[BaseException], ...] = ()
) -> list[Any]:
    """Start every call at once (behind a barrier), each in its own thread, and return each
    one's result, or the exception it raised when that exception is one of ``expected``.

    Raises:
        AssertionError: a call raised an exception that is not ``expected`` (chained to it),
            or a call did not return within ``JOIN_SECONDS``.
    """
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def worker(i: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[i] = call()
        except BaseException as exc:  # handed to the caller's thread below
            errors[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
    hung = [i for i, thread in enumerate(threads) if thread.is_alive()]
    if hung:
        raise AssertionError(f"calls {hung} did not return within {JOIN_SECONDS} s")
    for i, error in enumerate(errors):
        if error is None:
            continue
        if not isinstance(error, expected):
            raise AssertionError(f"call {i} raised {error!r}") from error
        results[i] = error
    return results
