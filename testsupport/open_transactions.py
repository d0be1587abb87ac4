"""Audit-writing transactions held open in threads, so tests can choose the order in which
they take event ids and commit (each thread has its own database connection)."""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction

from agentops.actors import Actor
from audit.services import audit_record


class OpenTransaction:
    """A transaction in a thread of its own that does what it is told, step by step.

    ``begin(xid_first=True)`` opens it and (when asked) takes its transaction id at once, as a
    transaction that changed a row before writing its audit event does; ``record()`` writes one
    audit event of run ``run_id`` (a chain of its own unless two share it) through
    ``audit_record`` and returns its id; ``commit()`` ends it. Each call returns once the thread
    has done it; ``record`` on a chain another open transaction holds blocks: use
    ``record_later`` and ``wait``.
    """

    def __init__(self, *, run_id: uuid.UUID | None = None, project_id: int | None = None) -> None:
        self.run_id = run_id or uuid.uuid4()
        self.project_id = project_id
        self._orders: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self._results: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            with transaction.atomic():
                while (order := self._orders.get()) is not None:
                    try:
                        self._results.put((True, order()))
                    except Exception as error:  # handed to the test's thread
                        self._results.put((False, error))
                        raise
            self._results.put((True, None))
        except _Abort:
            pass
        finally:
            connection.close()

    def _ask(self, order: Callable[[], Any] | None) -> Any:
        self._orders.put(order)
        return self.wait()

    def wait(self, timeout: float = 10) -> Any:
        """The result of the last order sent (raises what it raised)."""
        ok, value = self._results.get(timeout=timeout)
        if not ok:
            raise value
        return value

    def begin(self, *, xid_first: bool = True) -> None:
        def start() -> None:
            if xid_first:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_current_xact_id()")

        self._ask(start)

    def _record(self) -> int:
        event = audit_record(
            actor=Actor.system("test"),
            verb="test.recorded",
            object_type="test",
            object_id=1,
            run_id=self.run_id,
            project_id=self.project_id,
        )
        assert event.pk is not None
        return int(event.pk)

    def record(self) -> int:
        return int(self._ask(self._record))

    def record_later(self) -> None:
        """Send ``record`` without waiting for it (``wait`` returns its id)."""
        self._orders.put(self._record)

    def commit(self) -> None:
        self._ask(None)
        self._thread.join(10)

    def abort(self) -> None:
        """Roll back if still open (a failed test's teardown); a blocked order is cancelled by
        closing the connection."""
        if not self._thread.is_alive():
            return

        def rollback() -> None:
            raise _Abort

        self._orders.put(rollback)
        self._thread.join(5)


class _Abort(Exception):
    """Rolls an open transaction back."""
