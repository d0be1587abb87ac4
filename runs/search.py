"""Full-text search of runs: the words of a run's goal, of its steps' tool-call arguments and
results, and of its conversation (``Message`` content and tool calls).

On PostgreSQL each searched column is indexed by a GIN index on the expression
``TextDocument(column)`` (migration ``0029_search_indexes``; the query below repeats the same
expression, so the planner uses the indexes: ``tests/runs/test_run_search.py`` checks the
plan). The ``simple`` text-search configuration lowercases words and never stems them, so an id
such as a reservation code ``ZFA04Y`` is found as written, in any case. On SQLite (the quick
start) the same search is a plain case-insensitive substring match.
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.db import connection
from django.db.models import Func, Q

from runs.models import Message, Run, Step

# Only the first SEARCHED_CHARS characters of each value are searched: PostgreSQL refuses a
# tsvector over 1 MB, and a write that built one would fail (a tool result can be megabytes).
SEARCHED_CHARS = 100_000
CONFIG = "simple"


class TextDocument(Func):
    """The words of a column's text (JSON as its text) as a ``tsvector`` of the ``simple``
    configuration, its first ``SEARCHED_CHARS`` characters. The configuration and the length
    are literals of the template, not parameters: the expression must be the indexed one
    exactly, whatever the query's parameters."""

    template = (
        f"to_tsvector('{CONFIG}'::regconfig, left((%(expressions)s)::text, {SEARCHED_CHARS}))"
    )
    output_field = SearchVectorField()


# What each searched table matches on: (model, its columns). A run is found by its own goal
# or by a row of either table that names it.
_STEP_COLUMNS = ("args", "result")
_MESSAGE_COLUMNS = ("content", "tool_calls")


def _postgres_matches(text: str) -> Q:
    query = SearchQuery(text, config=CONFIG, search_type="websearch")

    def matching(model: Any, columns: tuple[str, ...]) -> Any:
        documents = {f"{column}_words": TextDocument(column) for column in columns}
        found = Q()
        for name in documents:
            found |= Q(**{name: query})
        return model.objects.alias(**documents).filter(found).values("run_id")

    # Each table's matches are one index read (a hashed subquery): a condition on the runs'
    # own goal inside the OR would be evaluated run by run instead.
    by_goal = Run.objects.alias(goal_words=TextDocument("goal")).filter(goal_words=query)
    return (
        Q(pk__in=by_goal.values("pk"))
        | Q(pk__in=matching(Step, _STEP_COLUMNS))
        | Q(pk__in=matching(Message, _MESSAGE_COLUMNS))
    )


def _plain_matches(text: str) -> Q:
    def matching(model: Any, columns: tuple[str, ...]) -> Any:
        found = Q()
        for column in columns:
            found |= Q(**{f"{column}__icontains": text})
        return model.objects.filter(found).values("run_id")

    return (
        Q(goal__icontains=text)
        | Q(pk__in=matching(Step, _STEP_COLUMNS))
        | Q(pk__in=matching(Message, _MESSAGE_COLUMNS))
    )


def run_search_filter(text: str) -> Q:
    """What narrows a queryset of runs to those whose goal, steps' arguments or results, or
    conversation hold ``text`` (``runs.filter(condition)``).

    ``text`` is web-search syntax on PostgreSQL (words all present, ``"a phrase"``,
    ``-word``, ``a or b``: ``websearch_to_tsquery``, which never fails on any input); on
    SQLite the whole text is one case-insensitive substring.
    """
    if connection.vendor == "postgresql":
        return _postgres_matches(text)
    return _plain_matches(text)
