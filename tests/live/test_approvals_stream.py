"""The approvals inbox stream carries approval events only."""

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from agentops.actors import Actor
from approvals.services import approval_decide
from audit.selectors import event_list
from tests.live.conftest import (
    SEND_EMAIL,
    acreate_run,
    assert_nothing_more,
    communicator,
    receive_events,
    session_cookie,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("live_db")]


@database_sync_to_async
def approve(run, reviewer):
    approval = run.approvals.get()
    approval_decide(
        approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve", comment="ok"
    )


@database_sync_to_async
def approval_event_ids(after):
    return list(event_list(after=after, verb_prefix="approval.").values_list("id", flat=True))


def test_inbox_gets_approval_events_only(operator, reviewer):
    reviewer_cookie = session_cookie(reviewer)

    async def scenario():
        comm = communicator("/ws/approvals/", reviewer_cookie)
        assert (await comm.connect())[0]
        run = await acreate_run(operator, [{"tool": "echo", "args": {"value": 1}}, SEND_EMAIL])
        opened = await receive_events(comm, lambda got: len(got) == 1)
        assert opened[0]["verb"] == "approval.created"
        assert opened[0]["payload"]["tool"] == "send_email"
        await approve(run, reviewer)
        decided = await receive_events(
            comm, lambda got: bool(got) and got[-1]["verb"] == "approval.approved"
        )
        await assert_nothing_more(comm, "approvals")
        assert [e["verb"] for e in decided] == ["approval.decision", "approval.approved"]
        await comm.disconnect()

    async_to_sync(scenario)()


def test_inbox_replays_only_approval_events(operator, reviewer):
    reviewer_cookie = session_cookie(reviewer)

    async def scenario():
        run = await acreate_run(operator, [SEND_EMAIL])
        await approve(run, reviewer)
        comm = communicator("/ws/approvals/?after=0", reviewer_cookie)
        assert (await comm.connect())[0]
        expected = await approval_event_ids(0)
        replayed = await receive_events(comm, lambda got: len(got) == len(expected))
        assert [e["id"] for e in replayed] == expected
        assert all(e["verb"].startswith("approval.") for e in replayed)
        await assert_nothing_more(comm, "approvals")
        await comm.disconnect()

    async_to_sync(scenario)()
