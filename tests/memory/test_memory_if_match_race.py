"""Writers racing on one memory item (PostgreSQL, one thread and connection each): with the
same If-Match one wins and the others get 412; retrying from a fresh read, every write lands
exactly once with gapless versions; racing creators of a new key all land, one creating it."""

from __future__ import annotations

from collections import Counter

import pytest

from memory.models import MemoryItem, MemoryVersion
from tests.memory.conftest import PREFS, item_query, put_item
from testsupport.concurrency import run_together

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 10
ATTEMPTS = 30


def test_same_if_match_one_wins_the_others_get_412(operator_api):
    first = put_item(operator_api, PREFS, "tone", {"by": "seed"})
    etag = first["ETag"]
    calls = [
        lambda i=i: put_item(operator_api, PREFS, "tone", {"by": i}, if_match=etag)
        for i in range(WRITERS)
    ]
    codes = [response.status_code for response in run_together(calls)]
    assert Counter(codes) == {200: 1, 412: WRITERS - 1}
    winner = codes.index(200)
    item = MemoryItem.objects.get()
    assert (item.version, item.value) == (2, {"by": winner})
    versions = MemoryVersion.objects.filter(item_id=item.pk).order_by("version")
    assert [(v.version, v.value) for v in versions] == [(1, {"by": "seed"}), (2, {"by": winner})]


def test_retrying_writers_lose_no_update(operator_api):
    put_item(operator_api, PREFS, "log", {"by": "seed"})

    def writer(i: int) -> int:
        for _ in range(ATTEMPTS):
            etag = operator_api.get(item_query(PREFS, "log"))["ETag"]
            response = put_item(operator_api, PREFS, "log", {"by": i}, if_match=etag)
            if response.status_code == 200:
                return response.json()["version"]
            assert response.status_code == 412
        raise AssertionError(f"writer {i} never got through")

    won = run_together([lambda i=i: writer(i) for i in range(WRITERS)])
    item = MemoryItem.objects.get()
    versions = list(MemoryVersion.objects.filter(item_id=item.pk).order_by("version"))
    # Every writer's value is kept once, at the version it was told; versions have no gaps.
    assert [v.version for v in versions] == list(range(1, WRITERS + 2))
    assert sorted(won) == list(range(2, WRITERS + 2))
    assert {v.version: v.value["by"] for v in versions[1:]} == {
        version: i for i, version in enumerate(won)
    }
    assert item.version == WRITERS + 1


def test_racing_creators_of_a_new_key_all_land(operator_api):
    calls = [lambda i=i: put_item(operator_api, PREFS, "new", {"by": i}) for i in range(WRITERS)]
    codes = Counter(response.status_code for response in run_together(calls))
    assert codes == {201: 1, 200: WRITERS - 1}
    item = MemoryItem.objects.get()
    versions = MemoryVersion.objects.filter(item_id=item.pk).values_list("version", flat=True)
    assert sorted(versions) == list(range(1, WRITERS + 1))
