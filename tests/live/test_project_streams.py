"""Live streams respect project boundaries: a member of alpha never receives, replayed or
live, an event of beta's runs or approvals, and cannot open a stream of beta's run."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from audit import live
from audit.models import AuditEvent
from projects.models import Project
from tests.live.conftest import (
    SEND_EMAIL,
    acreate_run,
    close_code,
    communicator,
    create_run,
    marker,
    receive_events,
    receive_message,
    session_cookie,
)
from testsupport.factories import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("live_db")]

ECHO = {"tool": "echo", "args": {"value": 1}}


@pytest.fixture
def projects():
    return Project.objects.create(slug="alpha", name="A"), Project.objects.create(
        slug="beta", name="B"
    )


@database_sync_to_async
def _event_ids(run):
    return set(AuditEvent.objects.filter(run_id=run.pk).values_list("id", flat=True))


async def _marker_is_next(comm, group: str) -> None:
    await database_sync_to_async(live.flush)()
    sent = marker()
    await get_channel_layer().group_send(group, {"type": "audit.events", "events": [sent]})
    message = await receive_message(comm)
    assert (message["type"], message["event"]) == ("event", sent), message


def test_the_runs_stream_replays_and_forwards_only_the_members_projects(projects):
    alpha, beta = projects
    alice = make_user("alice", "operator", project=alpha)
    bob = make_user("bob", "operator", project=beta)
    run_a = create_run(alice, [ECHO], project=alpha)
    create_run(bob, [ECHO], project=beta)
    cookie = session_cookie(alice)

    async def scenario():
        comm = communicator("/ws/runs/?after=0", cookie)
        assert (await comm.connect())[0]
        ids = await _event_ids(run_a)
        replayed = await receive_events(comm, lambda got: {e["id"] for e in got} >= ids)
        assert {e["run_id"] for e in replayed} == {str(run_a.pk)}
        await _marker_is_next(comm, live.runs_group(alpha.pk))
        # Live: beta's run commits first, then alpha's; only alpha's reaches alice.
        await acreate_run(bob, [ECHO], beta)
        later = await acreate_run(alice, [ECHO], alpha)
        ids = await _event_ids(later)
        # (Eager tasks publish a run's later transactions before its first one: any order.)
        forwarded = await receive_events(comm, lambda got: {e["id"] for e in got} >= ids)
        assert {e["run_id"] for e in forwarded} == {str(later.pk)}
        await _marker_is_next(comm, live.runs_group(alpha.pk))
        await comm.disconnect()

    async_to_sync(scenario)()


def test_another_projects_run_stream_is_not_found(projects):
    alpha, beta = projects
    alice = make_user("alice", "operator", project=alpha)
    run_b = create_run(make_user("bob", "operator", project=beta), [ECHO], project=beta)
    cookie = session_cookie(alice)
    assert async_to_sync(close_code)(communicator(f"/ws/runs/{run_b.pk}/", cookie)) == 4404


def test_the_approvals_stream_carries_only_the_reviewers_projects(projects):
    alpha, beta = projects
    rex = make_user("rex", "reviewer", project=beta)
    run_a = create_run(make_user("alice", "operator", project=alpha), [SEND_EMAIL], alpha)
    run_b = create_run(make_user("bob", "operator", project=beta), [SEND_EMAIL], beta)
    assert run_a.approvals.exists()
    cookie = session_cookie(rex)

    async def scenario():
        comm = communicator("/ws/approvals/?after=0", cookie)
        assert (await comm.connect())[0]
        replayed = await receive_events(comm, lambda got: len(got) == 1)
        assert replayed[0]["run_id"] == str(run_b.pk)
        await _marker_is_next(comm, live.approvals_group(beta.pk))
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_user_of_no_project_cannot_follow_the_runs_stream(projects):
    cookie = session_cookie(make_user("nobody"))
    assert async_to_sync(close_code)(communicator("/ws/runs/", cookie)) == 4403
