"""Pages of artifacts: the preview a run page loads when its artifact's section is opened."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from artifacts import selectors
from artifacts.models import Artifact
from projects.views import object_permission


def _artifact_project(artifact_id: uuid.UUID) -> int | None:
    return Artifact.objects.filter(pk=artifact_id).values_list("project_id", flat=True).first()


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _artifact_project, "artifact_id")
def artifact_preview(request: HttpRequest, artifact_id: uuid.UUID) -> HttpResponse:
    """The start of a text artifact (``selectors.artifact_preview``), as an HTML fragment
    (escaped text: whatever the file holds is shown, never run).

    Raises:
        Http404: no such artifact, or one the user may not see.
    """
    artifact = get_object_or_404(Artifact, pk=artifact_id)
    context = {"artifact": artifact, "preview": selectors.artifact_preview(artifact=artifact)}
    return render(request, "artifacts/_preview.html", context)
