"""``runs.store.adapt`` gives the database exactly what Django's own field adaptation gives:
checked against ``Field.get_db_prep_save`` itself, for every field of the models the hot path
writes, with values of the right type, of a neighbouring type (a bool for an integer, a naive
datetime, a str for a UUID) and hostile ones."""

import datetime as dt
import uuid
from typing import Any

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.models import AuditEvent
from runs.models import Checkpoint, Run, Step, StepAttempt, ToolCall
from runs.store.adapt import adapter_of, param_of

MODELS = (Run, Step, StepAttempt, Checkpoint, ToolCall, AuditEvent)
FIELDS = [f for model in MODELS for f in model._meta.concrete_fields]

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(),
    st.uuids(),
    st.datetimes(timezones=st.none() | st.just(dt.UTC)),
    st.floats(allow_nan=False),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def same(a: Any, b: Any) -> bool:
    # JSON arrives wrapped for psycopg: compare what is wrapped.
    a, b = getattr(a, "obj", a), getattr(b, "obj", b)
    return type(a) is type(b) and a == b


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return "value", call()
    except Exception as error:  # the same error, or none, from both
        return "error", type(error)


@pytest.mark.django_db
@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(FIELDS), value=VALUES)
def test_a_value_reaches_the_database_as_django_sends_it(field, value):
    connection.ensure_connection()
    ours = outcome(lambda: adapter_of(field, connection.vendor)(value, connection))
    django = outcome(lambda: field.get_db_prep_save(value, connection))
    assert ours[0] == django[0], (field, value, ours, django)
    if ours[0] == "value":
        assert same(ours[1], django[1]), (field, value, ours, django)
    else:
        assert ours[1] is django[1]


@pytest.mark.django_db
def test_an_instance_s_fields_reach_the_database_as_django_sends_them(operator):
    from agentops.actors import Actor
    from runs.control.create import run_create

    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="adapt",
        steps=[{"tool": "echo", "args": {"value": {"n": 1}}}],
    )
    objs = [Run.objects.get(pk=run.pk), *Step.objects.filter(run=run), *AuditEvent.objects.all()]
    for obj in objs:
        for field in type(obj)._meta.concrete_fields:
            if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
                continue  # a new "now" each call
            ours = param_of(field, connection.vendor, add=False)(obj, connection)
            django = field.get_db_prep_save(field.pre_save(obj, add=False), connection)
            assert same(ours, django), (field, ours, django)
    assert isinstance(run.pk, uuid.UUID)
