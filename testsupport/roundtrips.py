"""Counting round trips to PostgreSQL as libpq itself records them (its protocol trace).

A round trip is the client sending one or more messages and then waiting for the server's
answer: statements sent together in pipeline mode count once, and BEGIN and COMMIT count like
any statement. libpq writes every protocol message it sends (``F``) or receives (``B``) to the
trace (``PQtrace``, PostgreSQL's documentation, "Control Functions"), so the count does not
depend on how agentops or Django report their statements.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# PQTRACE_SUPPRESS_TIMESTAMPS (libpq-fe.h): one message per line, direction first.
_SUPPRESS_TIMESTAMPS = 1


@dataclass
class RoundTrips:
    """What the trace of one block recorded: ``count`` round trips, ``sent`` messages sent,
    ``commits`` COMMIT statements sent."""

    count: int = 0
    sent: int = 0
    commits: int = 0


def count_round_trips(trace: str) -> RoundTrips:
    """The round trips in a libpq trace (one message per line, ``F`` or ``B`` first): each
    run of sent messages followed by a received one is one."""
    found = RoundTrips()
    sending = False
    for line in trace.splitlines():
        direction = line.split("\t", 1)[0]
        if direction == "F":
            found.sent += 1
            sending = True
            if line.endswith('"COMMIT"') or '"COMMIT" ' in line:
                found.commits += 1
        elif direction == "B" and sending:
            found.count += 1
            sending = False
    return found


@contextmanager
def round_trips(db: Any) -> Iterator[RoundTrips]:
    """Count the round trips of the Django connection ``db`` (PostgreSQL, already connected)
    inside the block; the result is filled in when the block ends.

    Raises:
        RuntimeError: ``db`` is not an open PostgreSQL connection.
    """
    if db.vendor != "postgresql" or db.connection is None:
        raise RuntimeError("round trips are counted on an open PostgreSQL connection")
    pgconn = db.connection.pgconn
    found = RoundTrips()
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(_SUPPRESS_TIMESTAMPS)
        try:
            yield found
        finally:
            pgconn.untrace()
            trace.seek(0)
            counted = count_round_trips(trace.read())
            found.count, found.sent, found.commits = counted.count, counted.sent, counted.commits
