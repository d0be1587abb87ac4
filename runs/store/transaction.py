"""The executor's transactions: Django's ``atomic`` with the audit writer, pipelined."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from audit.services import ChainHeads, audited_atomic
from runs.store import pipeline


@contextmanager
def pipelined_atomic() -> Iterator[ChainHeads]:
    """``audit.services.audited_atomic`` whose statements, and the writing of its audit
    events, run in a batch (``runs.store.pipeline``) inside Django's transaction: on
    PostgreSQL its locks and reads cost one round trip, its writes, checks and audit events
    another, besides Django's own BEGIN and COMMIT (``tests/runs/store``). Django owns the
    transaction: it begins, commits or rolls back, and runs the on-commit callbacks, as for
    any ``atomic`` block.

    Yields the chain heads the block's events moved to (as ``audited_atomic``).

    Raises:
        the ``expect_one`` error of a guarded write that changed no row
            (``ConcurrentTransition``, ``audit.services.ChainMoved``, ...); nothing is committed.
    """
    with audited_atomic(within=pipeline.batch) as moved:
        yield moved
