"""What a status means to the people and programs that read it: label, tone and class.

Every app keeps one map per status field (``runs.statuses``, ``approvals.models``) from its
stored values to a ``StatusInfo``; models, the API, templates, CSS classes (``tone-<tone>``)
and the live streams read that map instead of listing statuses of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# The tones a status is shown in; the stylesheet has one class per tone (``.tone-<tone>``).
TONES = ("neutral", "active", "attention", "success", "danger", "muted")


@dataclass(frozen=True)
class StatusInfo:
    """One status of one kind of object.

    ``value`` is what the API, audit events and pages show; ``label`` its human name;
    ``tone`` one of ``TONES``. ``terminal``: the object never changes status again. ``open``:
    not finished (for steps: pending or in flight). ``in_flight``: a step the executor is busy
    with, which holds back the steps after it. ``cancellable``: cancelling the run (or the
    object) moves it to cancelled.
    """

    value: str
    label: str
    tone: str
    terminal: bool = False
    open: bool = False
    in_flight: bool = False
    cancellable: bool = False

    def __post_init__(self) -> None:
        if self.tone not in TONES:
            raise ValueError(f"tone {self.tone!r} is not one of {TONES}")


def status_map(infos: Iterable[StatusInfo], *, choices: Iterable[str]) -> dict[str, StatusInfo]:
    """``{value: info}`` for ``infos``, checked to cover exactly the field's ``choices``.

    Raises:
        ValueError: a choice has no info or an info no choice (the map and the field drifted).
    """
    found = {info.value: info for info in infos}
    wanted = set(choices)
    if set(found) != wanted:
        raise ValueError(f"statuses {sorted(wanted ^ set(found))} are in one list only")
    return found


def with_flag(statuses: dict[str, StatusInfo], flag: str) -> frozenset[str]:
    """The values of ``statuses`` whose ``flag`` (``terminal``, ``open``, ...) is set."""
    return frozenset(value for value, info in statuses.items() if getattr(info, flag))
