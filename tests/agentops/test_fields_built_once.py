"""``agentops.serializers.FieldsBuiltOnce``: DRF's fields and JSON, the fields built once per
class. Renderings are compared with DRF's own ``Serializer`` on a twin class without the
base: the observer is DRF itself."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ObjectDoesNotExist
from rest_framework import serializers

from agentops.serializers import FieldsBuiltOnce


class Owner:
    name = "ada"


class Thing:
    """An object with plain attributes, a method, a property whose related row is missing."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def shout(self) -> str:
        return str(self.__dict__["name"]).upper()

    @property
    def related(self) -> str:
        raise ObjectDoesNotExist("no related row")


def _declared() -> dict[str, Any]:
    return {
        "name": serializers.CharField(),
        "upper": serializers.CharField(source="shout"),
        "count": serializers.IntegerField(allow_null=True),
        "when": serializers.DateTimeField(),
        "price": serializers.DecimalField(max_digits=6, decimal_places=2),
        "ratio": serializers.DecimalField(max_digits=6, decimal_places=3, coerce_to_string=False),
        "related": serializers.CharField(allow_null=True),
        "with_default": serializers.CharField(source="absent", default="d"),
        "nullable": serializers.CharField(source="absent", allow_null=True),
        "optional": serializers.CharField(source="absent", required=False),
        "owner": serializers.CharField(source="owner.name"),
        "tags": serializers.ListField(child=serializers.CharField()),
        "flags": serializers.DictField(child=serializers.BooleanField()),
        "whole": serializers.SerializerMethodField(),
        "secret": serializers.CharField(write_only=True),
        "get_whole": lambda self, obj: f"{type(obj).__name__}{self.context.get('suffix', '')}",
    }


Fast = type("Fast", (FieldsBuiltOnce,), _declared())
Plain = type("Plain", (serializers.Serializer,), _declared())

THING = Thing(
    name="box",
    count=None,
    when=datetime.datetime(2026, 3, 4, 7, 6, 7, 890, tzinfo=ZoneInfo("Europe/Paris")),
    price=Decimal("1.5"),
    ratio=2,
    owner=Owner(),
    tags=["a", 1],
    flags={"x": 1, "y": "false"},
    secret="s",
)


def test_an_object_renders_as_drf_renders_it():
    fast = Fast(THING, context={"suffix": "!"}).data
    assert list(fast.items()) == list(Plain(THING, context={"suffix": "!"}).data.items())
    assert list(fast.items()) == [
        ("name", "box"),
        ("upper", "BOX"),
        ("count", None),
        ("when", "2026-03-04T06:06:07.000890Z"),
        ("price", "1.50"),
        ("ratio", Decimal("2.000")),
        ("related", None),
        ("with_default", "d"),
        ("nullable", None),
        ("owner", "ada"),
        ("tags", ["a", "1"]),
        ("flags", {"x": True, "y": False}),
        ("whole", "Thing!"),
    ]


def test_a_mapping_renders_as_drf_renders_it():
    item = {**THING.__dict__, "shout": "LOUD", "related": "r", "owner": {"name": "bo"}}
    assert list(Fast(item).data.items()) == list(Plain(item).data.items())


def test_a_missing_required_attribute_raises_drf_s_error():
    thing = Thing(**{k: v for k, v in THING.__dict__.items() if k != "tags"})
    with pytest.raises(AttributeError) as fast:
        Fast(thing).data  # noqa: B018
    with pytest.raises(AttributeError) as plain:
        Plain(thing).data  # noqa: B018
    assert str(fast.value) == str(plain.value).replace("Plain", "Fast")
    assert "field `tags` on serializer `Fast`" in str(fast.value)


def test_each_instance_has_its_own_bound_fields_and_context():
    first, second = Fast(THING, context={"suffix": "1"}), Fast(THING, context={"suffix": "2"})
    assert first.fields["whole"].parent is first
    assert first.fields["tags"].child.root is first
    assert (first.data["whole"], second.data["whole"]) == ("Thing1", "Thing2")


def test_changing_one_instance_s_fields_leaves_the_others_alone():
    changed = Fast()

    def refuse(value: Any) -> None:
        raise serializers.ValidationError("no")

    changed.fields["name"].validators.append(refuse)
    changed.fields["name"].required = False
    del changed.fields["count"]
    fresh = Fast()
    assert refuse not in fresh.fields["name"].validators
    assert len(fresh.fields["name"].validators) == len(Plain().fields["name"].validators)
    assert fresh.fields["name"].required is True
    assert "count" in fresh.fields


def test_the_fields_are_drf_s_and_built_once_per_class(monkeypatch):
    built = []
    own = serializers.Serializer.get_fields

    def counted(self: serializers.Serializer) -> Any:
        built.append(type(self).__name__)
        return own(self)

    monkeypatch.setattr(serializers.Serializer, "get_fields", counted)
    Fresh = type("Fresh", (FieldsBuiltOnce,), _declared())
    Child = type("Child", (Fresh,), {"extra": serializers.CharField()})
    fresh = [Fresh().fields for _ in range(3)][-1]
    child = [Child().fields for _ in range(2)][-1]
    assert built == ["Fresh", "Child"]
    assert "extra" in child
    assert "extra" not in fresh
    plain = Plain().fields
    assert list(fresh) == list(plain)
    assert [repr(field) for field in fresh.values()] == [repr(f) for f in plain.values()]
