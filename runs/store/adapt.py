"""Field values as the database takes them, for ``runs.store.rows``: what Django's
``Field.pre_save`` and ``Field.get_db_prep_save`` give, without calling them where they would
hand the value back unchanged.

A step's transaction writes about a hundred field values and creating a run of 25 steps about
eight hundred; Django's two calls cost a few microseconds a value, most of it to return a
``str``, an ``int`` or an aware ``datetime`` as it came. ``param_of`` checks the value's exact
type against what the field's class stores as is on this database (``_STORED_AS_IS``); any
other value (JSON, decimals, naive datetimes, a ``bool`` for an integer column, a field class
not listed) goes through Django's own calls, so the database receives exactly what the ORM
would send.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django_fsm import FSMField

_INTEGERS = (
    models.AutoField,
    models.BigAutoField,
    models.SmallAutoField,
    models.IntegerField,
    models.BigIntegerField,
    models.SmallIntegerField,
    models.PositiveIntegerField,
    models.PositiveBigIntegerField,
    models.PositiveSmallIntegerField,
)

# Field classes (exact classes: a subclass may adapt differently) and the Python types whose
# values their ``get_db_prep_save`` returns unchanged, everywhere (Django 5.2,
# django/db/models/fields/__init__.py: ``get_prep_value`` is ``to_python``, which returns a
# value of the field's own type as it is) or on PostgreSQL only (``adapt_datetimefield_value``
# and native UUIDs; SQLite turns both into text).
_STORED_AS_IS: dict[type[Field[Any, Any]], tuple[type, ...]] = {
    models.CharField: (str,),
    models.TextField: (str,),
    FSMField: (str,),
    models.BooleanField: (bool,),
    **{kind: (int,) for kind in _INTEGERS},
}
_STORED_AS_IS_POSTGRESQL: dict[type[Field[Any, Any]], tuple[type, ...]] = {
    models.DateTimeField: (datetime,),
    models.UUIDField: (uuid.UUID,),
}


def _stored_as_is(field: Field[Any, Any], vendor: str) -> tuple[type, ...]:
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    found = _STORED_AS_IS.get(type(target), ())
    if not found and vendor == "postgresql":
        found = _STORED_AS_IS_POSTGRESQL.get(type(target), ())
    return found


def _plain_pre_save(field: Field[Any, Any]) -> bool:
    """Whether ``field.pre_save`` only reads the instance's attribute (no ``auto_now``)."""
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return False
    return type(field).pre_save in (Field.pre_save, models.DateField.pre_save)


# A field's value as the database takes it: from a value, or from the instance being saved.
Adapter = Callable[[Any, BaseDatabaseWrapper], Any]
Param = Callable[[Model, BaseDatabaseWrapper], Any]


def param_of(field: Field[Any, Any], vendor: str, *, add: bool) -> Param:
    """The function giving, for an instance being saved (a new row with ``add``) and a
    connection to a ``vendor`` database, the value of ``field`` the database gets:
    ``field.get_db_prep_save(field.pre_save(obj, add), db)``. Build it once per field (the
    callers' statement caches keep it)."""
    adapt = adapter_of(field, vendor)
    attname = field.attname
    if _plain_pre_save(field):
        return lambda obj, db: adapt(getattr(obj, attname), db)
    return lambda obj, db: adapt(field.pre_save(obj, add), db)


def adapter_of(field: Field[Any, Any], vendor: str) -> Adapter:
    """The function giving ``field.get_db_prep_save(value, db)`` for a connection to a
    ``vendor`` database, without the calls that would hand ``value`` back as it is. Build it
    once per field (the callers' statement caches keep it)."""
    as_is = _stored_as_is(field, vendor)
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    # The backend wraps integers by their field's type (psycopg's ``Int4`` and the like, so
    # that PostgreSQL knows their type with server-side binding); not those of auto fields
    # (``AutoFieldMixin.get_db_prep_value``).
    auto = isinstance(target, models.AutoField | models.BigAutoField | models.SmallAutoField)
    integer = target.get_internal_type() if isinstance(target, _INTEGERS) and not auto else ""
    nullable = field.null

    def adapt(value: Any, db: BaseDatabaseWrapper) -> Any:
        kind = type(value)
        if (value is None and nullable) or (
            kind in as_is and (kind is not datetime or value.tzinfo is not None)
        ):
            return db.ops.adapt_integerfield_value(value, integer) if integer else value
        return field.get_db_prep_save(value, db)

    return adapt if as_is else field.get_db_prep_save
