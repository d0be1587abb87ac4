"""Namespaces of memory items: tuples of labels, stored joined by ``.``.

The rules are LangGraph's (``langgraph.store.base``'s namespace validation): a namespace has
at least one label, every label is a non-empty string without ``.``; agentops also bounds
their number and length so a path fits its column and its index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from agentops.errors import InvalidInput
from agentops.storable import require_storable

# Between the labels of a namespace in ``namespace_path``: LangGraph forbids it inside labels.
NAMESPACE_SEPARATOR: Final = "."
MAX_LABELS: Final = 20
MAX_LABEL_CHARS: Final = 200
MAX_PATH_CHARS: Final = 1000
# Matches any one label in the prefix or suffix of ``list_namespaces`` (LangGraph's wildcard).
WILDCARD: Final = "*"


def namespace_labels(
    raw: Any, *, field: str = "namespace", allow_empty: bool = False
) -> tuple[str, ...]:
    """``raw`` (a list of strings, or a ``.``-joined string as query strings send it) as a
    checked tuple of labels.

    Raises:
        InvalidInput: not a list of 1 to 20 (0 with ``allow_empty``) non-empty strings of up
            to 200 characters without ``.``, or a path over 1000 characters.
    """
    if isinstance(raw, str):
        raw = raw.split(NAMESPACE_SEPARATOR) if raw else []
    if not isinstance(raw, list | tuple) or not all(isinstance(label, str) for label in raw):
        raise InvalidInput(f"{field} must be a list of strings", field=field)
    if not raw and not allow_empty:
        raise InvalidInput(f"{field} needs at least one label", field=field)
    if len(raw) > MAX_LABELS:
        raise InvalidInput(f"{field} may have at most {MAX_LABELS} labels", field=field)
    for label in raw:
        if not label:
            raise InvalidInput(f"{field}: labels may not be empty", field=field)
        if NAMESPACE_SEPARATOR in label:
            raise InvalidInput(f"{field}: labels may not contain '.' ({label!r})", field=field)
        require_storable(label, field=field, max_length=MAX_LABEL_CHARS)
    labels = tuple(raw)
    if len(namespace_path(labels)) > MAX_PATH_CHARS:
        raise InvalidInput(f"{field} is over {MAX_PATH_CHARS} characters joined", field=field)
    return labels


def namespace_path(labels: Sequence[str]) -> str:
    """The stored form of a namespace: its labels joined by ``.``."""
    return NAMESPACE_SEPARATOR.join(labels)


def matches(labels: Sequence[str], pattern: Sequence[str], *, at_end: bool = False) -> bool:
    """Whether ``labels`` start (``at_end``: end) with ``pattern``, where a ``*`` label of the
    pattern matches any one label."""
    if len(pattern) > len(labels):
        return False
    part = labels[len(labels) - len(pattern) :] if at_end else labels[: len(pattern)]
    return all(want in (WILDCARD, have) for want, have in zip(pattern, part, strict=True))
