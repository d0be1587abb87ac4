"""Retention of artifacts: deleted with the steps and runs they belong to, their files once
the deleting transaction commits.

``ArtifactRows`` is the ``runs.retention.DependentRows`` of this app (registered by the runs
app, which sits above this one); ``artifacts_delete_for_runs`` also serves a run's
redaction, which keeps the run but none of its data.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q

from artifacts.models import Artifact
from artifacts.services import delete_files_on_commit


def _delete(artifacts: Any) -> None:
    names = list(artifacts.values_list("storage_name", flat=True))
    if names:
        artifacts.delete()
        delete_files_on_commit(names)


def artifacts_delete_for_runs(run_ids: list[uuid.UUID]) -> None:
    """Delete the artifacts of runs ``run_ids`` in the caller's transaction, and their files
    after it commits."""
    _delete(Artifact.objects.filter(run_id__in=run_ids))


def artifacts_delete_for_subject(*, run_ids: list[uuid.UUID], session_ids: list[uuid.UUID]) -> int:
    """Delete the artifacts of runs ``run_ids`` or sessions ``session_ids`` (a subject's, for
    its erasure) in the caller's transaction, and their files after it commits; returns how
    many."""
    found = Artifact.objects.filter(Q(run_id__in=run_ids) | Q(session_id__in=session_ids))
    count = found.count()
    _delete(found)
    return count


class ArtifactRows:
    """The artifacts hanging off runs and steps, for retention (``runs.retention``)."""

    def exclude_open(self, runs: Any) -> Any:
        """``runs`` unchanged: no artifact holds a run open."""
        return runs

    def delete_for_steps(self, step_ids: list[int]) -> None:
        """Delete the artifacts of steps ``step_ids`` (their files after the commit)."""
        _delete(Artifact.objects.filter(step_id__in=step_ids))

    def delete_for_runs(self, run_ids: list[uuid.UUID]) -> None:
        """Delete the artifacts left of runs ``run_ids`` (their files after the commit)."""
        artifacts_delete_for_runs(run_ids)
