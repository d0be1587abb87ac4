"""django-fsm's optimistic locking, with a cheaper record of the statuses an instance was loaded
with (a page builds a hundred model instances).

``ConcurrentTransitionMixin`` records each FSM field's value when an instance is built, saved
or refreshed, and a later save updates the row only if its statuses still have those values.
Its record walks every field of the model (an ``isinstance`` test each) and reads each status
through django-fsm's descriptor, which builds a ``DeferredAttribute`` per read.
"""

from __future__ import annotations

from typing import Any

from django_fsm import ConcurrentTransitionMixin, FSMFieldMixin

# The attnames of each model's FSM fields, found on its first instance (fields are fixed once
# the app registry is ready).
_STATE_ATTNAMES: dict[type, tuple[str, ...]] = {}


class ConcurrentTransitions(ConcurrentTransitionMixin):
    """``ConcurrentTransitionMixin`` with the same record (``{attname: value}`` of every FSM
    field) made from the instance's loaded values: a status left out of the query (deferred)
    is still read through its descriptor, which loads it, as django-fsm does."""

    def _update_initial_state(self) -> None:
        model = type(self)
        names = _STATE_ATTNAMES.get(model)
        if names is None:
            names = _STATE_ATTNAMES[model] = tuple(
                field.attname for field in self._meta.fields if isinstance(field, FSMFieldMixin)
            )
        loaded: dict[str, Any] = self.__dict__
        # django-fsm's private record (name-mangled), which its _do_update reads.
        self._ConcurrentTransitionMixin__initial_states = {
            name: loaded[name] if name in loaded else getattr(self, name) for name in names
        }
