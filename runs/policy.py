"""Per-project policy: what a project's calls are classified under, and how a change of it is
recorded.

A project's policy is the set of its own policy objects (risk rules with their approval
policies, its tool grant; later its validators) on top of the global defaults
(``project=None``). Every change goes through ``policy_change_locked``, which moves the
project's ``policy_version`` counter (``projects.models.Project``) and writes the change,
with its before, after and diff (a JSON Patch, RFC 6902, made by ``jsonpatch``), to the
project's audit chain (``audit.models.project_chain``) in the same transaction. Any policy
object joins by calling it from its service; each step records the version it was
classified under (``Step.policy_version``).

The tool grants in force for a run's calls (``agentops.grants``) are read with the version:
the run's own and its token's (fixed at creation, ``Run.grants``), its session's and its
project's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import jsonpatch

from agentops.actors import Actor
from agentops.grants import parse_grant, refusal
from audit.models import project_chain
from audit.services import audit_record, audited_atomic
from projects.models import Project
from runs.gates import StepRequest, step_policy
from runs.models import AgentSession, Run


@dataclass(frozen=True)
class PolicyContext:
    """What the calls of one run are classified under: its ``project_id``, the project's
    policy ``version``, and the ``grants`` in force (``(source, grant)`` pairs,
    ``agentops.grants.refusal``)."""

    project_id: int
    version: int
    grants: tuple[tuple[str, dict[str, Any] | None], ...]

    def refusal(self, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """The ``not_granted`` refusal of a call of ``tool`` with ``args``; None when every
        grant in force allows it."""
        return refusal(self.grants, tool, args)


def _context(
    project_id: int,
    version: int,
    run_grants: list[dict[str, Any]],
    session_grant: tuple[dict[str, Any] | None] | tuple[()],
    project_grant: dict[str, Any] | None,
) -> PolicyContext:
    grants: list[tuple[str, dict[str, Any] | None]] = [
        (item["source"], item["grant"]) for item in run_grants
    ]
    grants.extend(("session", grant) for grant in session_grant)
    grants.append(("project", project_grant))
    return PolicyContext(project_id, version, tuple(grants))


def fixed_grants(*, grant: Any, token_grant: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The grants fixed on a new run (``Run.grants``): ``[{"source": "run" | "token",
    "grant"}]`` for the run's own ``grant`` (as the client sent it) and the creating token's
    (already parsed), each when given.

    Raises:
        InvalidInput: ``grant`` is malformed (``agentops.grants.parse_grant``).
    """
    return [
        {"source": source, "grant": value}
        for source, value in (("run", parse_grant(grant)), ("token", token_grant))
        if value is not None
    ]


def run_policy(run: Run) -> PolicyContext:
    """The policy the calls of ``run`` (a row read with its ``grants``) are classified under
    now: one query of its project's grant and version (two with a session, for its
    grant)."""
    project_id = cast(int, run.project_id)  # every run has a project (the stubs allow None)
    project_grant, version = Project.objects.values_list("grant", "policy_version").get(
        pk=project_id
    )
    session: tuple[dict[str, Any] | None] | tuple[()] = ()
    if run.session_id is not None:
        session = (AgentSession.objects.values_list("grant", flat=True).get(pk=run.session_id),)
    return _context(project_id, version, run.grants, session, project_grant)


def run_policy_of(run_id: Any) -> PolicyContext:
    """``run_policy`` of the run ``run_id`` in one query (the run, its project and its
    session joined): what appending a step reads before its transaction.

    Raises:
        Run.DoesNotExist: unknown run.
    """
    project_id, run_grants, session_id, session_grant, project_grant, version = (
        Run.objects.filter(pk=run_id)
        .values_list(
            "project_id",
            "grants",
            "session_id",
            "session__grant",
            "project__grant",
            "project__policy_version",
        )
        .get()
    )
    session = (session_grant,) if session_id is not None else ()
    return _context(project_id, version, run_grants, session, project_grant)


def call_refusal(run: Run, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """Why a call of ``tool`` with ``args`` may not be made in ``run`` now: outside the grants
    in force, or matched by a ``deny`` risk rule of its project or the global ones (the step
    policy's ``Classification.refusal``); None when it may. For arguments a person edits
    at a gate: an edit never takes a call outside its run's policy."""
    refused = run_policy(run).refusal(tool, args)
    if refused is not None:
        return refused
    request = StepRequest(tool, args, edited=True, project_id=run.project_id)
    return step_policy().classify([request])[0].refusal


def policy_diff(before: Any, after: Any) -> list[dict[str, Any]]:
    """The JSON Patch (RFC 6902) that turns ``before`` into ``after`` (JSON values; None, a
    policy object that did not exist or no longer does, counts as an empty object)."""
    patch = jsonpatch.make_patch(before or {}, after or {})
    return list(patch.patch)


def policy_change_locked(
    *,
    project: Project,
    actor: Actor,
    kind: str,
    object_id: Any,
    before: Any,
    after: Any,
) -> int:
    """Record one change of ``project``'s policy, inside the transaction that makes it, with
    the project's row locked by the caller (``lock_project``): the project's
    ``policy_version`` moves on by one, and the audit event ``policy.<kind>_changed``
    (``kind``: ``risk_rule``, ``grant``, ...) of the policy object ``object_id`` is written
    to the project's chain with ``{"before", "after", "diff", "version"}`` (``before`` /
    ``after``: the object as JSON, None when it was created / deleted). Returns the new
    version."""
    project.policy_version += 1
    project.save(update_fields=["policy_version"])
    audit_record(
        actor=actor,
        verb=f"policy.{kind}_changed",
        object_type=kind,
        object_id=object_id,
        project_id=project.pk,
        from_state="" if before is None else "present",
        to_state="" if after is None else "present",
        payload={
            "before": before,
            "after": after,
            "diff": policy_diff(before, after),
            "version": project.policy_version,
        },
        chain=project_chain(project.pk),
    )
    return project.policy_version


def owned_change_recorded(
    *,
    actor: Actor,
    kind: str,
    object_id: Any,
    before: Any,
    after: Any,
    as_json: Callable[[Any], Any],
) -> None:
    """Record a change of a policy object a project may own (a model row with a
    ``project_id``; None: global), ``before`` and ``after`` it (None when it was created or
    deleted; ``as_json`` gives its JSON), in the policy of each project it belonged to before
    or after (``policy_change_locked``), inside the transaction that made the change: a
    project that gains it sees it created, one that loses it sees it deleted; a global
    object is no project's policy."""
    owners = {row.project_id for row in (before, after) if row is not None and row.project_id}
    for project_id in sorted(owners):
        was = before if before is not None and before.project_id == project_id else None
        now = after if after is not None and after.project_id == project_id else None
        policy_change_locked(
            project=lock_project(project_id),
            actor=actor,
            kind=kind,
            object_id=object_id,
            before=as_json(was) if was is not None else None,
            after=as_json(now) if now is not None else None,
        )


def lock_project(project_id: int) -> Project:
    """The project ``project_id``, its row locked until the transaction ends: what serializes
    the changes of its policy (and so its version counter and audit chain).

    Raises:
        Project.DoesNotExist: unknown project.
    """
    return Project.objects.select_for_update().get(pk=project_id)


def project_grant_set(*, project_id: int, actor: Actor, grant: Any) -> dict[str, Any] | None:
    """Replace the tool grant of the project ``project_id`` by ``grant``
    (``agentops.grants.parse_grant``; None: no limit) as a policy change (audited, version
    moved on). The caller has checked that ``actor`` administers the project. Returns the
    stored grant.

    Raises:
        InvalidInput: ``grant`` is malformed.
        Project.DoesNotExist: unknown project.
    """
    parsed = parse_grant(grant)
    with audited_atomic():
        project = lock_project(project_id)
        before = project.grant
        project.grant = parsed
        project.save(update_fields=["grant"])
        if before != parsed:
            policy_change_locked(
                project=project,
                actor=actor,
                kind="grant",
                object_id=project.pk,
                before=before,
                after=parsed,
            )
    return parsed
