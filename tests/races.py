"""Running calls at the same moment from several threads, each with its own DB connection."""

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections


def run_together(calls: list[Callable[[], Any]]) -> list[Any]:
    """Start every call at once (a barrier) and return each one's result or raised exception."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def worker(i: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[i] = call()
        except Exception as exc:
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results
