"""The JSON diff behind "state before and after a step", on a table of cases."""

import random

import pytest

from runs.state_diff import Change, change_count, json_diff, state_change_counts

CASES = [
    ("equal objects", {"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, []),
    ("added key", {}, {"a": 1}, [Change("/a", "added", after=1)]),
    ("removed key", {"a": {"x": 1}}, {}, [Change("/a", "removed", before={"x": 1})]),
    ("changed scalar", {"a": 1}, {"a": 2}, [Change("/a", "changed", 1, 2)]),
    (
        "nested change keeps siblings",
        {"c": {"name": "Ann", "age": 30}},
        {"c": {"name": "Ann", "age": 31}},
        [Change("/c/age", "changed", 30, 31)],
    ),
    (
        "keys in sorted order",
        {"b": 1},
        {"a": 1, "c": 2},
        [
            Change("/a", "added", after=1),
            Change("/b", "removed", before=1),
            Change("/c", "added", after=2),
        ],
    ),
    (
        "list items by index",
        [1, 2, 3],
        [1, 5],
        [Change("/1", "changed", 2, 5), Change("/2", "removed", before=3)],
    ),
    ("list grows", {"l": []}, {"l": ["x"]}, [Change("/l/0", "added", after="x")]),
    ("type change", {"a": {"x": 1}}, {"a": [1]}, [Change("/a", "changed", {"x": 1}, [1])]),
    ("true is not 1", {"a": 1}, {"a": True}, [Change("/a", "changed", 1, True)]),
    ("1 and 1.0 are one number", {"a": 1}, {"a": 1.0}, []),
    ("null to value", {"a": None}, {"a": 0}, [Change("/a", "changed", None, 0)]),
    ("whole value", 1, "1", [Change("", "changed", 1, "1")]),
    (
        "pointer escapes ~ and /",
        {},
        {"a/b": 1, "m~n": 2},
        [Change("/a~1b", "added", after=1), Change("/m~0n", "added", after=2)],
    ),
]


@pytest.mark.parametrize(
    ("before", "after", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_json_diff(before, after, expected):
    assert json_diff(before, after) == expected
    assert change_count(before, after) == len(expected)


def _value(rng, depth):
    kinds = ["int", "float", "bool", "none", "str"] + (["dict", "list"] if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "dict":
        return {rng.choice("abcde/~"): _value(rng, depth + 1) for _ in range(rng.randrange(4))}
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        "int": lambda: rng.choice([0, 1, 2]),
        "float": lambda: rng.choice([0.0, 1.0, 2.5]),
        "bool": lambda: rng.choice([True, False]),
        "none": lambda: None,
        "str": lambda: rng.choice(["", "x", "1"]),
    }[kind]()


def _mutated(rng, value):
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(sorted(value))
        return {**value, key: _mutated(rng, value[key])}
    if isinstance(value, list) and value and rng.random() < 0.7:
        index = rng.randrange(len(value))
        return [*value[:index], _mutated(rng, value[index]), *value[index + 1 :]]
    return _value(rng, 2)


def test_change_count_is_the_number_of_changes_json_diff_finds():
    rng = random.Random(12)
    for _ in range(3000):
        before = _value(rng, 0)
        after = _mutated(rng, before) if rng.random() < 0.8 else _value(rng, 0)
        assert change_count(before, after) == len(json_diff(before, after)), (before, after)


class _Step:
    def __init__(self, pk):
        self.pk = pk


def test_the_state_before_a_step_is_the_last_earlier_checkpoint_or_empty():
    steps = [_Step(1), _Step(2), _Step(3)]
    # Step 2 has no checkpoint: step 3 is compared with step 1's state, step 1 with {}.
    counts = state_change_counts(steps, {1: {"n": 1}, 3: {"n": 2, "m": 0}})
    assert counts == {1: 1, 3: 2}


def test_equal_looking_values_of_other_json_types_are_changes():
    # Equal in Python (True == 1, 1 == 1.0) is not always the same JSON.
    assert json_diff({"a": [1, True], "b": {"c": 1}}, {"a": [1, 1], "b": {"c": 1}}) == [
        Change("/a/1", "changed", True, 1)
    ]
    assert json_diff({"a": [1, 2.0]}, {"a": [1, 2]}) == []
    assert json_diff({"a": {"b": [1, {"c": None}]}}, {"a": {"b": [1, {"c": None}]}}) == []
