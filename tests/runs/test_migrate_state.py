"""``manage.py migrate_state``: the stored states of a schema's runs upgraded in batches, each
run once (a new state version and an audit event), resumable after SIGKILL; a dry run counts
and shows a sample, writing nothing."""

from __future__ import annotations

import sys
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count

from agentops.actors import Actor
from audit.models import AuditEvent
from projects.models import Project, default_project_id
from projects.roles import Role
from runs.control.state_schemas import state_schema_create
from runs.models import Run, StateSchema, StateVersion, state_hash
from tests.api.conftest import run_url, token_client
from tests.conftest import _child_env
from testsupport.factories import make_user
from testsupport.processes import Process, wait_until
from testsupport.state import assert_unchanged

V1 = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
V2 = {
    "type": "object",
    "required": ["passenger", "cabin"],
    "properties": {"passenger": {"type": "string"}, "cabin": {"enum": ["economy", "business"]}},
}
STEPS = [
    {"op": "rename", "from": "/name", "to": "/passenger"},
    {"op": "default", "path": "/cabin", "value": "economy"},
    {"op": "remove", "path": "/scratch"},
]
RUNS = 1000


def schemas(project: Project | None = None) -> tuple[StateSchema, StateSchema]:
    project = project or Project.objects.get(pk=default_project_id())
    actor = Actor.system("test")
    v1 = state_schema_create(actor=actor, project=project, name="booking", schema=V1)
    v2 = state_schema_create(
        actor=actor, project=project, name="booking", schema=V2, migration_steps=STEPS
    )
    return v1, v2


def v1_state(i: int) -> dict[str, Any]:
    state: dict[str, Any] = {"name": f"passenger {i}"}
    if i % 3 == 0:
        state["cabin"] = "business"
    if i % 2 == 0:
        state["scratch"] = [i]
    return state


def expected_v2(v1: dict[str, Any]) -> dict[str, Any]:
    """The v2 form of a v1 state, written out here rather than by the migration code."""
    return {"passenger": v1["name"], "cabin": v1.get("cabin", "economy")}


def old_runs(schema: StateSchema, count: int) -> list[Run]:
    """``count`` client runs on ``schema`` (v1), each with version 1 of its state, ``v1_state``
    of its position; made in bulk (the services would take minutes for a thousand)."""
    runs = Run.objects.bulk_create(
        Run(project_id=schema.project_id, goal=f"run {i}", agent="client", state_schema=schema)
        for i in range(count)
    )
    StateVersion.objects.bulk_create(
        StateVersion(
            run=run,
            version=1,
            state=v1_state(i),
            state_hash=state_hash(v1_state(i)),
            schema_version=1,
            operation="put",
            writer_kind="user",
        )
        for i, run in enumerate(runs)
    )
    return runs


@pytest.mark.django_db
def test_a_dry_run_counts_and_shows_a_sample_writing_nothing(seeded):
    v1, _ = schemas()
    old_runs(v1, 1)
    out = StringIO()
    with assert_unchanged():
        call_command("migrate_state", "booking", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "runs by the schema version of their current state: v1: 1" in text
    assert "added /passenger: None -> 'passenger 0'" in text
    assert "removed /name: 'passenger 0' -> None" in text
    assert "removed /scratch" in text


@pytest.mark.django_db
def test_a_dry_run_s_sample_fails_where_the_migration_fails_it(seeded):
    v1, _ = schemas()
    (run,) = old_runs(v1, 1)
    # V2 takes it, but a stored state may not nest deeper than 32 levels.
    deep: dict[str, Any] = {}
    for _ in range(40):
        deep = {"d": deep}
    StateVersion.objects.filter(run=run).update(state={"name": "x", "deep": deep})
    out = StringIO()
    with assert_unchanged():
        call_command("migrate_state", "booking", "--dry-run", stdout=out)
    assert "would fail: state nests deeper than the limit of 32 levels" in out.getvalue()
    out = StringIO()
    with pytest.raises(CommandError, match="1 runs could not be migrated"):
        call_command("migrate_state", "booking", stdout=out)
    assert f"run {run.pk} not migrated: state nests deeper than the limit" in out.getvalue()


@pytest.mark.django_db
def test_each_run_is_migrated_once_audited_and_a_run_that_cannot_be_is_reported(seeded):
    v1, _ = schemas()
    runs = old_runs(v1, 4)
    # A state that cannot become v2: its name is no string.
    StateVersion.objects.filter(run=runs[3]).update(state={"name": 7})
    out = StringIO()
    with pytest.raises(CommandError, match="1 runs could not be migrated"):
        call_command("migrate_state", "booking", "--batch-size", "3", stdout=out)
    assert f"run {runs[3].pk} not migrated" in out.getvalue()
    assert "passenger: 7 is not of type 'string'" in out.getvalue()
    for i, run in enumerate(runs[:3]):
        new = StateVersion.objects.get(run=run, version=2)
        assert (new.operation, new.schema_version, new.state) == (
            "migrate",
            2,
            expected_v2(v1_state(i)),
        )
        assert (new.writer_kind, new.rationale) == ("system", "schema booking v1 -> v2")
        event = AuditEvent.objects.get(run_id=run.pk, verb="run.state_migrated")
        assert (event.payload["from_schema_version"], event.payload["to_schema_version"]) == (1, 2)
    assert not StateVersion.objects.filter(run=runs[3], version=2).exists()
    with assert_unchanged(), pytest.raises(CommandError):
        call_command("migrate_state", "booking", stdout=StringIO())


@pytest.mark.django_db
def test_another_projects_runs_are_migrated_to_their_own_projects_schema(seeded):
    v1, _ = schemas()
    other = Project.objects.create(slug="other", name="Other")
    other_v1 = state_schema_create(
        actor=Actor.system("test"), project=other, name="booking", schema=V1
    )
    mine, theirs = old_runs(v1, 1)[0], old_runs(other_v1, 1)[0]
    call_command("migrate_state", "booking", stdout=StringIO())
    assert StateVersion.objects.filter(run=mine, operation="migrate").count() == 1
    # The other project has no v2: nothing to do there.
    assert StateVersion.objects.filter(run=theirs).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nothing"], "no project has a state schema 'nothing'"),
        (["booking", "--to", "5"], "not 5"),
        (["booking", "--batch-size", "0"], "batch size"),
    ],
)
def test_bad_arguments_are_command_errors(seeded, args, message):
    schemas()
    with assert_unchanged(), pytest.raises(CommandError, match=message):
        call_command("migrate_state", *args, stdout=StringIO())


@pytest.mark.django_db(transaction=True)
def test_a_thousand_runs_killed_halfway_are_each_migrated_once_when_run_again(tmp_path, seeded):
    v1, _ = schemas()
    runs = old_runs(v1, RUNS)
    migrated = StateVersion.objects.filter(operation="migrate")
    command = [sys.executable, "manage.py", "migrate_state", "booking", "--batch-size", "5"]
    first = Process(command, _child_env(), tmp_path / "first.log", name="migrate_state")
    # Killed once some batches committed, never by a timer: the count decides.
    wait_until(lambda: migrated.count() > 0 or not first.alive, 120, "a first batch")
    first.crash()
    done_before_kill = migrated.count()
    assert 0 < done_before_kill < RUNS, (tmp_path / "first.log").read_text()

    second = Process(command, _child_env(), tmp_path / "second.log", name="migrate_state")
    wait_until(lambda: not second.alive, 300, "the second migrate_state to end")
    log = (tmp_path / "second.log").read_text()
    assert second.proc.returncode == 0, log
    assert f"{RUNS - done_before_kill} runs migrated to booking v2" in log

    per_run = migrated.values("run_id").annotate(n=Count("id"))
    assert {row["run_id"] for row in per_run} == {run.pk for run in runs}
    assert {row["n"] for row in per_run} == {1}
    events = AuditEvent.objects.filter(verb="run.state_migrated").values("run_id")
    assert sorted(e["run_id"] for e in events) == sorted(run.pk for run in runs)
    by_run = {row.run_id: row for row in migrated}
    for i, run in enumerate(runs):
        new = by_run[run.pk]
        assert (new.version, new.schema_version) == (2, 2)
        assert new.state == expected_v2(v1_state(i))

    api = token_client(make_user("vera", Role.VIEWER))
    for i in (0, 1, RUNS // 2, RUNS - 1):
        old = api.get(run_url(runs[i].pk, "state"), {"version": 1}).json()
        assert old == {
            "version": 1,
            "state": v1_state(i),
            "schema_version": 1,
            "upgraded_from": None,
        }
        current = api.get(run_url(runs[i].pk, "state")).json()
        assert (current["version"], current["schema_version"]) == (2, 2)
        assert current["upgraded_from"] is None


@pytest.mark.django_db(transaction=True)
def test_two_commands_at_once_migrate_each_run_once(tmp_path, seeded):
    v1, _ = schemas()
    runs = old_runs(v1, 300)
    command = [sys.executable, "manage.py", "migrate_state", "booking", "--batch-size", "7"]
    both = [
        Process(command, _child_env(), tmp_path / f"{i}.log", name="migrate_state")
        for i in range(2)
    ]
    wait_until(lambda: not any(p.alive for p in both), 300, "both commands to end")
    logs = [(tmp_path / f"{i}.log").read_text() for i in range(2)]
    assert [p.proc.returncode for p in both] == [0, 0], logs
    counts = [int(log.strip().splitlines()[-1].split(": ")[1].split()[0]) for log in logs]
    assert sum(counts) == len(runs)
    per_run = StateVersion.objects.filter(operation="migrate").values("run_id")
    per_run = per_run.annotate(n=Count("id"))
    assert len(per_run) == len(runs)
    assert {row["n"] for row in per_run} == {1}
    assert AuditEvent.objects.filter(verb="run.state_migrated").count() == len(runs)
