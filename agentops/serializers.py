"""A serializer base for the API's hot paths: the same fields and JSON as DRF's, less CPU.

DRF builds a serializer's fields anew for every instance: ``ModelSerializer.get_fields``
introspects the model and deep-copies the declared fields (each copy re-runs the field's
``__init__``), then reads each value through several layers of lookup per field.
``FieldsBuiltOnce`` builds the fields once per class, gives each instance shallow copies to
bind, and reads plain attributes with one ``getattr``: ``RunSerializer`` of a run with 25
steps went from about 4.4 to 1.5 ms of CPU. The fields, and so the OpenAPI schema
(drf-spectacular reads ``fields``), stay DRF's own; so do the values, each rendered by its
field's ``to_representation``.

DRF itself has no per-class cache (encode/django-rest-framework#2504 and #7093 were closed
unmerged); one would break a ``get_fields`` that depends on the instance, its context or its
data, hence a base that serializers opt in to.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cached_property
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from rest_framework import serializers
from rest_framework.fields import BuiltinSignatureError, Field, SkipField, is_simple_callable
from rest_framework.relations import PKOnlyObject


def _holds_fields(field: Field) -> bool:
    # A nested serializer, a list serializer (its child), a ListField or DictField (its
    # child), a many-related field (its child relation): fields bound to this one.
    return (
        isinstance(field, serializers.BaseSerializer)
        or hasattr(field, "child")
        or hasattr(field, "child_relation")
    )


def _clone(field: Field, holds_fields: bool) -> Field:
    # A field holding bound fields is deep-copied, as DRF copies every field, so that the
    # inner fields' parent is the copy. A leaf field is copied shallowly (without re-running
    # its __init__): binding sets attributes on the copy only, and its validators list is
    # its own so that appending to it changes one instance, as with DRF's copies.
    if holds_fields:
        return copy.deepcopy(field)
    clone = object.__new__(type(field))
    clone.__dict__.update(field.__dict__)
    if "_validators" in clone.__dict__:
        clone.validators = list(field.validators)
    return clone


def _simple_callable(value: Any) -> bool:
    # Whether DRF's lookup would call ``value`` (or refuse it: a builtin raises there).
    try:
        return is_simple_callable(value)
    except BuiltinSignatureError:
        return True


class FieldsBuiltOnce(serializers.Serializer[Any]):
    """A serializer whose ``get_fields()`` runs once per class, and whose
    ``to_representation`` reads single-attribute sources with one ``getattr``.

    Each instance still gets its own field objects (bound to it, so ``context``,
    ``SerializerMethodField`` and nested serializers behave as in DRF). Only for classes whose
    ``get_fields()`` depends on nothing but the class: not on ``context``, ``instance`` or
    ``data``. An instance may change its fields as DRF allows (assign attributes, add or
    delete fields, append validators), but not mutate in place a container a leaf field
    shares with the class's copy (its ``choices``, ``error_messages``).

    The JSON is DRF's: every value goes through its field's ``to_representation``, and any
    field whose lookup is not a plain attribute read (dotted or ``*`` source, a field with its
    own ``get_attribute``, a missing attribute, a callable, a mapping instance) takes DRF's
    path. The readable fields are listed at an instance's first rendering: change its fields
    before that, not between two renderings.
    """

    def get_fields(self) -> dict[str, Field]:
        cls = type(self)
        # Per class, not inherited: a subclass declares other fields. Never bound or used:
        # only copied.
        built: list[tuple[str, Field, bool]] | None = cls.__dict__.get("_fields_built_once")
        if built is None:
            fields = super().get_fields()
            built = [(name, field, _holds_fields(field)) for name, field in fields.items()]
            cls._fields_built_once = built  # type: ignore[attr-defined]
        return {name: _clone(field, holds) for name, field, holds in built}

    @cached_property
    def _read_plan(self) -> list[tuple[str, str | None, Field]]:
        # (key, attribute to read or None for DRF's lookup, field) for each readable field.
        plan: list[tuple[str, str | None, Field]] = []
        for key, field in self.fields.items():
            if field.write_only:
                continue
            plain = (
                type(field).get_attribute is Field.get_attribute and len(field.source_attrs) == 1
            )
            plan.append((key, field.source_attrs[0] if plain else None, field))
        return plan

    def to_representation(self, instance: Any) -> dict[str, Any]:
        if isinstance(instance, Mapping):
            return super().to_representation(instance)
        ret: dict[str, Any] = {}
        for key, attr, field in self._read_plan:
            if attr is not None:
                try:
                    value = getattr(instance, attr)
                except ObjectDoesNotExist:
                    ret[key] = None
                    continue
                except AttributeError:
                    attr = None
                else:
                    if callable(value) and _simple_callable(value):
                        attr = None
            if attr is None:
                # DRF's lookup: defaults, allow_null, SkipField, callables, its error messages.
                try:
                    value = field.get_attribute(instance)
                except SkipField:
                    continue
                if isinstance(value, PKOnlyObject) and value.pk is None:
                    ret[key] = None
                    continue
            ret[key] = None if value is None else field.to_representation(value)
        return ret
