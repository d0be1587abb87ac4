"""Erasure of a subject's data (issue 31, part 3; GDPR art. 17, the right to erasure): the
sessions of one end user (``AgentSession.subject``) in a project, the conversations, agent
state and artifacts of their runs, the memory items about them (``MemoryItem.subject``; both
issue 33) with their history, and the sessions' and items' own audit chains.

What is deleted: every session of the subject (its messages, compactions and state
versions), and of every run of those sessions its messages, compactions, state versions and
artifacts, with the artifacts of the sessions (their files once the deletion commits; the
run itself stays, its ``message_count`` and ``context_tokens`` at 0 and
``metadata.erased_at`` set, so its steps, ledger and audit chain, which other runs and
reviewers may depend on, remain). The sessions' audit chains (``session:<id>``), whose
events name the client's ids and rationales, are purged by retention's
``audit.services.audit_purge_chains``, which leaves a redacted ``audit.chains_purged`` event
in the system chain; each run's chain keeps a ``run.subject_erased`` event with counts only.
The subject id itself is recorded nowhere: the system event names its SHA-256.

Not deleted: a run's goal, input, steps' arguments and results (the executor's record of
what was done, kept until the run's own retention policy applies).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any, Final

from django.db.models import F
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import InvalidInput
from agentops.storable import require_storable
from artifacts.retention import artifacts_delete_for_subject
from audit.models import session_chain
from audit.services import audit_purge_chains, audit_system, audited_atomic
from memory.models import memory_chain
from memory.retention import delete_items, subject_items
from projects.models import Project
from runs.models import AgentSession, Compaction, Message, Run, StateVersion
from runs.transitions import record_event

# Audit events deleted per transaction while a session's chain is purged.
_PURGE_BATCH: Final = 1000


@dataclass(frozen=True)
class Erasure:
    """What ``subject_erase`` deleted: ``sessions``, ``runs`` (whose conversation and state
    went), ``messages``, ``state_versions``, ``artifacts`` (their files too), ``memory_items``
    (with their history) and ``audit_chains`` (purged)."""

    subject: str
    sessions: int
    runs: int
    messages: int
    state_versions: int
    artifacts: int
    memory_items: int
    audit_chains: int

    def counts(self) -> dict[str, int]:
        """The counts, without the subject id."""
        return {key: value for key, value in asdict(self).items() if key != "subject"}


def subject_erase(*, actor: Actor, project: Project, subject: Any) -> Erasure:
    """Delete the data of ``subject`` (a non-empty subject id, up to 200 characters) in
    ``project`` (see the module's docstring for what goes and what stays) and return the
    counts. Idempotent: a second call finds nothing and answers zeros (and still records
    its event).

    Locks the subject's sessions' runs, then the sessions (the lock order of
    ``runs.transitions``), in one transaction that deletes the rows and writes the runs'
    ``run.subject_erased`` and the system chain's ``subject.erased`` events; then the
    sessions' audit chains are purged (retention's batches, after that commit: a purge must
    not run inside ``audited_atomic``). The caller has checked that the actor may erase
    (``runs.erase_subject``: project admins).

    Raises:
        InvalidInput: a blank or malformed subject.
    """
    if not isinstance(subject, str) or not subject.strip():
        raise InvalidInput("subject must be a non-empty subject id", field="subject")
    require_storable(subject, field="subject", max_length=200)
    now = timezone.now()
    with audited_atomic():
        sessions = AgentSession.objects.filter(project=project, subject=subject)
        session_ids = list(sessions.values_list("pk", flat=True))
        runs = list(
            Run.objects.select_for_update().filter(session_id__in=session_ids).order_by("pk")
        )
        list(sessions.select_for_update().order_by("pk").values_list("pk", flat=True))
        run_ids = [run.pk for run in runs]
        messages, _ = Message.objects.filter(run_id__in=run_ids).delete()
        messages += Message.objects.filter(session_id__in=session_ids).delete()[0]
        Compaction.objects.filter(run_id__in=run_ids).delete()
        Compaction.objects.filter(session_id__in=session_ids).delete()
        versions, _ = StateVersion.objects.filter(run_id__in=run_ids).delete()
        versions += StateVersion.objects.filter(session_id__in=session_ids).delete()[0]
        artifacts = artifacts_delete_for_subject(run_ids=run_ids, session_ids=session_ids)
        for run in runs:
            run.metadata = {**run.metadata, "erased_at": now.isoformat()}
            # The version moves too, so a writer holding an older copy of the run is refused.
            Run.objects.filter(pk=run.pk).update(
                message_count=0,
                context_tokens=0,
                metadata=run.metadata,
                session=None,
                version=F("version") + 1,
            )
            record_event(actor, run, "subject_erased", sessions=len(session_ids))
        AgentSession.objects.filter(pk__in=session_ids).delete()
        item_ids = subject_items(project_id=project.pk, subject=subject)
        delete_items(item_ids)
        erasure = Erasure(
            subject=subject,
            sessions=len(session_ids),
            runs=len(runs),
            messages=messages,
            state_versions=versions,
            artifacts=artifacts,
            memory_items=len(item_ids),
            audit_chains=len(session_ids) + len(item_ids),
        )
        audit_system(
            actor=actor,
            verb="subject.erased",
            object_type="subject",
            object_id=hashlib.sha256(subject.encode()).hexdigest(),
            payload={"project": project.slug, **erasure.counts()},
        )
    chains = [session_chain(pk) for pk in session_ids] + [memory_chain(pk) for pk in item_ids]
    if chains:
        # The events are already committed; their chains go in retention's own transactions.
        audit_purge_chains(
            chains=chains,
            batch_size=_PURGE_BATCH,
            actor=actor,
        )
    return erasure
