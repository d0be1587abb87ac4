"""A list's ``?cursor=`` is valid only as a page link made it: garbage and crafted cursors
(base64 of odd offsets, directions and positions) are a 400 naming ``cursor``, never a query
that fails in the database; real cursors still page through every row once."""

from __future__ import annotations

from base64 import b64encode

import pytest

from agentops.actors import Actor
from runs.control.create import run_create
from tests.api.conftest import RUNS_URL, token_client

pytestmark = pytest.mark.django_db


def crafted(text: str) -> str:
    return b64encode(text.encode()).decode()


CURSORS = [
    "garbage",
    "%%%",
    "\u00e9t\u00e9",
    crafted("o=-1"),
    crafted("o=x"),
    crafted("r=2x"),
    crafted("p=not-a-date"),
    crafted("p=2026-01-01 00:00:00"),
    crafted("p=2026-13-45 00:00:00+00:00"),
    crafted("p=2026-01-01 00:00:00+00:00\x00"),
    crafted("p=\x00"),
    b64encode("p=\u00e9".encode()).decode(),
]


@pytest.mark.parametrize("url", [RUNS_URL, "/api/v1/approvals/"])
@pytest.mark.parametrize("cursor", CURSORS)
def test_a_crafted_cursor_is_a_400_naming_it(operator_reviewer, url, cursor):
    response = token_client(operator_reviewer).get(url, {"cursor": cursor})
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "cursor"


def test_page_links_still_cover_every_run_once(operator_reviewer):
    actor = Actor.for_user(operator_reviewer)
    runs = [run_create(actor=actor, agent="client", goal=f"g{i}") for i in range(5)]
    api = token_client(operator_reviewer)
    seen, url = [], f"{RUNS_URL}?page_size=2"
    while url:
        page = api.get(url).json()
        seen += [run["id"] for run in page["results"]]
        url = page["next"]
    assert seen == [str(run.pk) for run in reversed(runs)]
    previous = api.get(page["previous"]).json() if page["previous"] else None
    assert previous is not None
    assert previous["results"]
