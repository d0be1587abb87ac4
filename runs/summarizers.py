"""Server-side summarizers: what writes a compaction's summary when the client gives none
(``runs.control.compaction``). ``AGENTOPS_SUMMARIZER`` names the one in use by dotted path.

A summarizer is a callable taking a run's active context (``runs.context_selectors.ContextEntry``
list, position order) and answering the ``Summary`` of the entries it replaces (a range of
positions and its text), or None when there is nothing worth replacing. Its ``version``
attribute (a string, optional) is recorded with each compaction it makes. It is called
outside any transaction, so it may take its time (a model call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from runs.context_selectors import ContextEntry


@dataclass(frozen=True)
class Summary:
    """A summary of messages ``first``..``last`` (positions, inclusive): ``text``."""

    first: int
    last: int
    text: str


class KeepFirstAndLast:
    """The default summarizer: keeps the context's first entry (the system prompt or the
    task) and its last ``AGENTOPS_CONTEXT_KEEP_LAST`` entries, and replaces everything in
    between with a note of what was left out (no model is asked). None when fewer than two
    entries lie in between."""

    version = "1"

    def __call__(self, entries: Sequence[ContextEntry]) -> Summary | None:
        keep_last: int = settings.AGENTOPS_CONTEXT_KEEP_LAST
        between = entries[1 : len(entries) - keep_last]
        if len(between) < 2:
            return None
        first, last = between[0].first, between[-1].last
        return Summary(
            first,
            last,
            f"[{last - first + 1} earlier messages (positions {first} to {last}) were left "
            "out of the context.]",
        )


keep_first_and_last = KeepFirstAndLast()
