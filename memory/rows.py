"""How memory items reach the database: the ``ItemRows`` protocol the persistence seam
implements (``runs.store.memory``, installed at start-up by the runs app, which sits above
this one), and the full-text vector's SQL it uses."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Final, Protocol

from memory.models import MemoryItem, MemoryVersion

# PostgreSQL's text search configuration for memory (stemmed English: "prefers" finds
# "preference"); queries must use the same one.
SEARCH_CONFIG: Final = "english"


def search_vector_sql() -> str:
    """The UPDATE (PostgreSQL) that sets the ``search_vector`` of the item whose id is its one
    ``%s`` parameter from its ``text`` (configuration ``SEARCH_CONFIG``)."""
    table = MemoryItem._meta.db_table
    return (
        f"UPDATE {table} SET search_vector = to_tsvector('{SEARCH_CONFIG}', text) "  # noqa: S608
        "WHERE id = %s"
    )


class ItemRows(Protocol):
    """How ``memory_put`` and the history of every write reach the database: through the
    persistence seam (``runs.store.memory.SeamItemRows``, installed at start-up by the runs
    app, which sits above this one: ``memory_use_rows``). On PostgreSQL a put costs a round
    trip for its locked reads (the item, its audit chain's head, an event id) and one for
    its writes and audit event, besides BEGIN and COMMIT (``benchmarks/README.md``, memory).
    """

    def transaction(self) -> AbstractContextManager[object]:
        """``audit.services.audited_atomic``, its statements pipelined where it can."""
        ...

    def locked_item(
        self, *, project_id: int, path: str, key: str, new_chain: str
    ) -> MemoryItem | None:
        """The item ``key`` at ``path`` of project ``project_id``, locked until the
        transaction ends (None: none); with ``new_chain`` (the audit chain the item will have
        if it is created), in the same round trip, that chain's head, locked, and an event id
        reserved (``runs.store.audit.prefetch_chains``)."""
        ...

    def insert(self, row: MemoryItem | MemoryVersion) -> None:
        """INSERT a new item (its ``search_vector`` set from its text) or version, the key
        the database gives a version not read back (its ``pk`` stays None)."""
        ...

    def update(self, item: MemoryItem) -> None:
        """UPDATE ``item``'s row with its ``UPDATED_FIELDS`` (and ``search_vector`` from its
        text) if it still has the version before this write.

        Raises:
            ConcurrentTransition: it has not (never: the caller holds its row lock).
        """
        ...


_rows: list[ItemRows] = []


def memory_use_rows(rows: ItemRows) -> None:
    """Read and write memory items through ``rows`` from now on, in this process (the runs
    app installs the seam's at start-up: ``RunsConfig.ready``)."""
    _rows[:] = [rows]


def item_rows() -> ItemRows:
    """The rows installed by ``memory_use_rows``.

    Raises:
        RuntimeError: none are installed (the runs app was not started).
    """
    if not _rows:
        raise RuntimeError("memory's rows are installed at start-up by the runs app")
    return _rows[0]
