"""django-fsm's optimistic guard for models whose rows the executor changes on every step."""

from __future__ import annotations

import functools
from typing import Any

from django.db import models
from django_fsm import ConcurrentTransitionMixin, FSMFieldMixin


@functools.cache
def fsm_fields(model: type[models.Model]) -> tuple[FSMFieldMixin, ...]:
    """The FSM fields of ``model`` (its status fields), in field order; computed once per
    model class."""
    return tuple(field for field in model._meta.fields if isinstance(field, FSMFieldMixin))


class GuardedTransitions(ConcurrentTransitionMixin):
    """``django_fsm.ConcurrentTransitionMixin`` (an ORM save of a row whose status changed since
    it was read raises ``ConcurrentTransition``) whose ``state_fields``, the public property
    the mixin reads each time an instance is built or saved, is the model's FSM fields
    computed once per class (``fsm_fields``) instead of a fresh filter over every field of
    the model: a step's transaction builds and saves runs and steps of some 50 fields several
    times."""

    @property
    def state_fields(self) -> Any:
        return fsm_fields(type(self))
