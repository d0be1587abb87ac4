"""The agent's own task state: every version of it that its agent wrote (``runs.control.state``)."""

from __future__ import annotations

import hashlib
import json

from django.db import models

# The ``schema_version`` of a state written by a run that declares no state schema
# (``StateSchema``); a run that declares one records its schema's version instead.
STATE_SCHEMA_VERSION = 1


def state_hash(state: object) -> str:
    """SHA-256 hex digest of the canonical JSON of ``state`` (keys sorted, no spaces, UTF-8, as
    ``Step.args_digest``): equal for equal documents whatever their key order."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def state_etag(run_id: object, version: int) -> str:
    """The strong entity tag (RFC 9110 §8.8.3) of version ``version`` of run ``run_id``'s agent
    state (or a session's, by its id), quotes included: ``"<run id>:<version>"``."""
    return f'"{run_id}:{version}"'


class StateVersion(models.Model):
    """One version of a run's agent state: the whole JSON object (``state``) the agent's
    write ``version`` left (1, 2, ... per run, with no gaps), apart from the executor's
    bookkeeping in ``Run.state``; or of a session's (``session`` set, ``run`` empty: the
    state that outlives a run, versioned the same way, 1, 2, ... per session).

    Version 0 is the state a run starts with: ``{}``, stored as no row, or, for a fork, the
    state it was forked from (a row). ``state_hash`` is ``state_hash(state)``; the writer's
    actor kind, id and display name are copied (no foreign key: history outlives users);
    ``step_index`` is the index of the step the write belongs to (None: none); ``rationale``
    why the agent wrote it; ``operation`` how (``put``, ``merge_patch``, ``json_patch``,
    ``fork``, ``migrate``); ``schema_version`` the version of the run's state schema
    (``StateSchema``) it was written under, ``STATE_SCHEMA_VERSION`` for a run without one.
    """

    run = models.ForeignKey(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="state_versions",
    )
    session = models.ForeignKey(
        "runs.AgentSession",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="state_versions",
        db_index=False,
    )
    version = models.PositiveIntegerField()
    state = models.JSONField(default=dict)
    state_hash = models.CharField(max_length=64)
    schema_version = models.PositiveSmallIntegerField(default=STATE_SCHEMA_VERSION)
    operation = models.CharField(max_length=16)
    writer_kind = models.CharField(max_length=16)
    writer_id = models.CharField(max_length=255, blank=True)
    writer_name = models.CharField(max_length=255, blank=True)
    step_index = models.PositiveIntegerField(null=True, blank=True)
    rationale = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "version"]
        # Two writers that both read version N can never both store N + 1.
        constraints = [
            models.UniqueConstraint(
                fields=["run", "version"], name="stateversion_run_version_uniq"
            ),
            models.UniqueConstraint(
                fields=["session", "version"],
                condition=models.Q(session__isnull=False),
                name="stateversion_session_version_uniq",
            ),
            models.CheckConstraint(
                condition=models.Q(run__isnull=False, session__isnull=True)
                | models.Q(run__isnull=True, session__isnull=False),
                name="stateversion_run_xor_session",
            ),
        ]

    def __str__(self) -> str:
        owner = f"run {self.run_id}" if self.run_id else f"session {self.session_id}"
        return f"state version {self.version} of {owner}"


class StateSchema(models.Model):
    """Version ``version`` (1, 2, ...) of the project's JSON Schema (draft 2020-12) named
    ``name`` for the agent states of the runs that declare it (``Run.state_schema``).

    ``schema`` is checked as a client's schema is (``runs.tools.schemas.schema_invalid``:
    local ``$ref`` only, RE2 patterns, no reference loops). A version above 1 says how a state
    of version ``version - 1`` becomes one of this version: ``migration_function``, the
    dotted path of a function registered with ``runs.state_migrations.state_migration`` for
    this name and version, or ``migration_steps``, a list of declarative steps
    (``runs.state_migrations.check_steps``); version 1 has neither. Versions are never changed
    or deleted once created (stored states name them); who created one is copied, as in
    audit rows.
    """

    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="state_schemas"
    )
    name = models.SlugField(max_length=100)
    version = models.PositiveIntegerField()
    schema = models.JSONField()
    migration_function = models.CharField(max_length=255, blank=True)
    migration_steps = models.JSONField(default=list, blank=True)
    description = models.TextField(blank=True)
    created_by_kind = models.CharField(max_length=16)
    created_by_id = models.CharField(max_length=255, blank=True)
    created_by_name = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name", "version"], name="stateschema_project_name_version_uniq"
            ),
            models.CheckConstraint(
                condition=models.Q(version__gte=1), name="stateschema_version_gte_1"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"
