"""State schemas: registering a version of a project's JSON Schema for agent states, and
migrating the stored states of its runs to a newer version (``manage.py migrate_state``)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError
from django.db.models import Count, F, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from agentops.storable import require_storable
from audit.services import audit_record, audited_atomic
from projects.models import Project
from runs.control.state import check_state
from runs.models import Run, StateSchema, StateVersion, state_hash
from runs.selectors import AgentState, agent_state_get, state_schema_versions
from runs.state_diff import Change, json_diff
from runs.state_migrations import MigrationFailed, check_steps, registered_migrations, state_upgrade
from runs.tools.schemas import schema_invalid
from runs.transitions import record_event

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
MAX_DESCRIPTION = 2000
# The highest schema version: what ``StateVersion.schema_version`` (a small integer) holds.
MAX_VERSION = 32767


def state_schema_check(
    *,
    project: Project,
    name: str,
    version: int,
    schema: Any,
    migration_function: str = "",
    migration_steps: Any = None,
) -> None:
    """Check a new version ``version`` of the project's state schema ``name`` (see
    ``StateSchema``) before it is stored: versions go 1, 2, ... without gaps; version 1 has no
    migration; a later one has exactly one: ``migration_function`` (a function registered for
    this name and version, ``runs.state_migrations.state_migration``) or ``migration_steps``
    (``runs.state_migrations.check_steps``; ``[]``: states carry over as they are).

    Raises:
        InvalidInput: naming the field: a name that is not a lowercase slug (1 to 100
            characters: ``a-z0-9_-``), a version that is not the next one (or over
            ``MAX_VERSION``), a schema that may
            not be used (``runs.tools.schemas.schema_invalid``: draft 2020-12, local
            ``$ref`` only, RE2 patterns, no loops), a missing, doubled or unknown migration.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput("name must be 1 to 100 characters of a-z, 0-9, _ and -", field="name")
    latest = (
        StateSchema.objects.filter(project=project, name=name)
        .order_by("-version")
        .values_list("version", flat=True)
        .first()
    )
    expected = (latest or 0) + 1
    if isinstance(version, bool) or not isinstance(version, int) or version != expected:
        raise InvalidInput(
            f"the next version of schema {name} is {expected} (versions go 1, 2, ...)",
            field="version",
        )
    if version > MAX_VERSION:
        raise InvalidInput(f"a schema has at most {MAX_VERSION} versions", field="version")
    problem = schema_invalid(schema)
    if problem:
        raise InvalidInput(f"schema: {problem}", field="schema")
    if version == 1:
        if migration_function or migration_steps is not None:
            raise InvalidInput("version 1 has no migration", field="migration_steps")
        return
    if bool(migration_function) == (migration_steps is not None):
        raise InvalidInput(
            f"version {version} needs one migration from version {version - 1}: "
            "migration_function or migration_steps",
            field="migration_steps",
        )
    if migration_function:
        if migration_function not in registered_migrations(name, version):
            known = ", ".join(registered_migrations(name, version)) or "none"
            raise InvalidInput(
                f"no migration to {name} v{version} is registered as {migration_function!r} "
                f"(registered: {known})",
                field="migration_function",
            )
        return
    problem = check_steps(migration_steps)
    if problem:
        raise InvalidInput(f"migration_steps{problem}", field="migration_steps")


def state_schema_create(
    *,
    actor: Actor,
    project: Project,
    name: str,
    schema: Any,
    version: int | None = None,
    migration_function: str = "",
    migration_steps: Any = None,
    description: str = "",
) -> StateSchema:
    """Register version ``version`` (default: the next) of the project's state schema
    ``name`` (checked by ``state_schema_check``; ``description`` at most ``MAX_DESCRIPTION``
    characters), with an audit event ``state_schema.created`` in the same transaction (the
    project's, on the system chain; published to live clients after commit). The caller has
    checked that the actor may register schemas in ``project``.

    Raises:
        InvalidInput: see ``state_schema_check``.
        Conflict: another request registered the same version first.
    """
    require_storable(description, field="description", max_length=MAX_DESCRIPTION)
    require_storable(schema, field="schema")
    require_storable(migration_steps, field="migration_steps")
    if version is None and isinstance(name, str):
        latest = StateSchema.objects.filter(project=project, name=name).order_by("-version")
        version = (latest.values_list("version", flat=True).first() or 0) + 1
    state_schema_check(
        project=project,
        name=name,
        version=version,
        schema=schema,
        migration_function=migration_function,
        migration_steps=migration_steps,
    )
    try:
        with audited_atomic():
            created = StateSchema.objects.create(
                project=project,
                name=name,
                version=version,
                schema=schema,
                migration_function=migration_function,
                migration_steps=[] if migration_steps is None else migration_steps,
                description=description,
                created_by_kind=actor.kind,
                created_by_id=actor.id,
                created_by_name=actor.name,
            )
            audit_record(
                actor=actor,
                verb="state_schema.created",
                object_type="state_schema",
                object_id=created.pk,
                project_id=project.pk,
                payload={
                    "name": name,
                    "version": version,
                    "migration_function": migration_function,
                    "migration_steps": created.migration_steps,
                },
            )
    except IntegrityError:
        raise Conflict(f"version {version} of schema {name} was registered meanwhile") from None
    return created


def _on_version() -> Coalesce:
    """The schema version a run's current state is stored under: its newest state version's,
    or, with none stored, the version the run declared."""
    newest = StateVersion.objects.filter(run_id=OuterRef("pk")).order_by("-version")
    return Coalesce(
        Subquery(newest.values("schema_version")[:1]),
        F("state_schema__version"),
        output_field=IntegerField(),
    )


def _runs_below(project_id: int, name: str, to_version: int) -> QuerySet[Run]:
    """The project's runs on state schema ``name`` whose current state is stored under a
    version below ``to_version`` (``_on_version``), in id order."""
    return (
        Run.objects.filter(project_id=project_id, state_schema__name=name)
        .annotate(on_version=_on_version())
        .filter(on_version__lt=to_version)
        .order_by("pk")
    )


def _target(project_id: int, name: str, to_version: int | None) -> dict[int, StateSchema]:
    """The versions of the schema (``state_schema_versions``), checked to reach ``to_version``.

    Raises:
        InvalidInput: the project has no schema ``name``, or no version ``to_version`` of it.
    """
    schemas = state_schema_versions(project_id=project_id, name=name)
    if not schemas:
        raise InvalidInput(f"the project has no state schema {name!r}", field="name")
    if to_version is not None and to_version not in schemas:
        raise InvalidInput(
            f"schema {name} has versions 1 to {max(schemas)}, not {to_version}", field="to"
        )
    return schemas


def _migrated(
    current: AgentState, schemas: dict[int, StateSchema], to_version: int
) -> dict[str, Any]:
    """The state ``state_migrate`` stores for a run whose current state is ``current``: upgraded
    to version ``to_version`` of ``schemas`` (``runs.state_migrations.state_upgrade``) and
    checked as every stored state is (``runs.control.state.check_state``).

    Raises:
        MigrationFailed: a migration failed on it, or the result does not match the schema.
        InvalidInput: the result may not be stored (``TooLarge`` too).
    """
    state = state_upgrade(
        current.state,
        schemas=schemas,
        from_version=current.schema_version,
        to_version=to_version,
    )
    check_state(state)
    return state


@dataclass
class MigrationBatch:
    """What one batch of ``state_migrate`` did: runs migrated, and those that failed with why
    (run id → message), the last run id it reached."""

    migrated: list[uuid.UUID] = field(default_factory=list)
    failed: dict[uuid.UUID, str] = field(default_factory=dict)
    last: uuid.UUID | None = None


def state_migrate_batch(
    *,
    project_id: int,
    name: str,
    to_version: int,
    after: uuid.UUID | None,
    batch_size: int,
    actor: Actor,
) -> MigrationBatch:
    """Migrate up to ``batch_size`` runs of state schema ``name`` whose current state is below
    version ``to_version``, with ids above ``after`` (None: from the first), in one
    transaction.

    The runs' rows are locked in id order (as ``lock_run`` does for a write of one run), and
    each run's current state is read again under its lock (a write in between may have
    upgraded it already; then it is left alone). Each run is given a new state version: its
    state upgraded (``runs.state_migrations.state_upgrade``), ``operation`` ``migrate``,
    written by ``actor``, ``rationale`` ``"schema <name> v<from> -> v<to>"``, and an audit
    event ``run.state_migrated`` (from and to schema versions and state versions, hashes),
    terminal runs included (their history stays as it was written; only a new version is
    added). A run whose state cannot be upgraded is left as it is and reported in
    ``failed``. Re-running after a crash finds only the runs not migrated yet: a run is
    migrated once.

    Raises:
        InvalidInput: no such schema or version (``_target``).
    """
    schemas = _target(project_id, name, to_version)
    done = MigrationBatch(last=after)
    with audited_atomic():
        below = _runs_below(project_id, name, to_version)
        if after is not None:
            below = below.filter(pk__gt=after)
        runs = list(below.select_for_update(of=("self",))[:batch_size])
        for run in runs:
            done.last = run.pk
            current = agent_state_get(run_id=run.pk)
            if current.schema_version >= to_version:
                continue
            try:
                state = _migrated(current, schemas, to_version)
            except (MigrationFailed, InvalidInput) as exc:
                done.failed[run.pk] = str(exc)
                continue
            new = StateVersion.objects.create(
                run=run,
                version=current.version + 1,
                state=state,
                state_hash=state_hash(state),
                schema_version=to_version,
                operation="migrate",
                writer_kind=actor.kind,
                writer_id=actor.id,
                writer_name=actor.name,
                rationale=f"schema {name} v{current.schema_version} -> v{to_version}",
            )
            record_event(
                actor,
                run,
                "state_migrated",
                schema=name,
                from_schema_version=current.schema_version,
                to_schema_version=to_version,
                version=new.version,
                base_version=current.version,
                hash_before=current.state_hash,
                hash_after=new.state_hash,
            )
            done.migrated.append(run.pk)
    return done


def state_migrate(
    *,
    project_id: int,
    name: str,
    to_version: int | None = None,
    batch_size: int = 100,
    actor: Actor,
    on_batch: Callable[[MigrationBatch], None] | None = None,
) -> tuple[int, dict[uuid.UUID, str]]:
    """Migrate the stored states of every run of the project's state schema ``name`` to
    version ``to_version`` (default: the newest), ``batch_size`` runs a transaction
    (``state_migrate_batch``), calling ``on_batch`` after each commits. Killed at any point,
    it can be run again: it finds only the runs still below the target.

    Returns how many runs were migrated, and the runs that could not be (id → why).

    Raises:
        InvalidInput: no such schema or version, or a batch size below 1.
    """
    if batch_size < 1:
        raise InvalidInput("the batch size must be 1 or more", field="batch_size")
    target = to_version or max(_target(project_id, name, to_version))
    migrated, failed = 0, dict[uuid.UUID, str]()
    after: uuid.UUID | None = None
    while True:
        batch = state_migrate_batch(
            project_id=project_id,
            name=name,
            to_version=target,
            after=after,
            batch_size=batch_size,
            actor=actor,
        )
        if batch.last == after:
            return migrated, failed
        migrated += len(batch.migrated)
        failed.update(batch.failed)
        after = batch.last
        if on_batch is not None:
            on_batch(batch)


@dataclass(frozen=True)
class MigrationPreview:
    """What ``state_migrate`` would do: the target version, how many of the schema's runs
    have their current state on each schema version, and one run it would migrate with the
    changes to its state (``sample_changes``) or why it would fail (``sample_failure``)."""

    to_version: int
    runs_by_version: dict[int, int]
    sample_run: uuid.UUID | None
    sample_changes: list[Change]
    sample_failure: str


def state_migrate_preview(
    *, project_id: int, name: str, to_version: int | None = None
) -> MigrationPreview:
    """The dry run of ``state_migrate``: reads only. Its sample fails where the migration
    would fail that run (``_migrated``).

    Raises:
        InvalidInput: no such schema or version.
    """
    schemas = _target(project_id, name, to_version)
    target = to_version or max(schemas)
    every = (
        Run.objects.filter(project_id=project_id, state_schema__name=name)
        .annotate(on_version=_on_version())
        .values("on_version")
        .annotate(runs=Count("pk"))
        .order_by()
    )
    counts = {row["on_version"]: row["runs"] for row in every}
    sample = _runs_below(project_id, name, target).first()
    changes: list[Change] = []
    failure = ""
    if sample is not None:
        current = agent_state_get(run_id=sample.pk)
        try:
            changes = json_diff(current.state, _migrated(current, schemas, target))
        except (MigrationFailed, InvalidInput) as exc:
            failure = str(exc)
    return MigrationPreview(
        target, dict(sorted(counts.items())), sample.pk if sample else None, changes, failure
    )
