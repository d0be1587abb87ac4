"""What every page's navigation shows of approvals (the Jinja2 backend's context processor,
``settings.TEMPLATES``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest

from approvals.selectors import pending_count
from projects.access import Access

# Where the inbox view leaves the count it already made (``approvals.views``).
PENDING_COUNT_ATTRIBUTE = "_agentops_pending_approvals"
VIEW_PERMISSION = "approvals.view_approvalrequest"


def pending_approvals(request: HttpRequest) -> dict[str, Callable[[], int | None]]:
    """``pending_approvals()``: the number of pending approval requests the user may see,
    None for a user who may see none (no badge). Counted once per request (one query), and
    only when a template asks."""

    def count() -> int | None:
        found: Any = getattr(request, PENDING_COUNT_ATTRIBUTE, None)
        if found is not None:
            return int(found)
        project_ids = Access(request.user).project_ids(VIEW_PERMISSION)
        if project_ids is not None and not project_ids:
            return None
        found = pending_count(project_ids=project_ids)
        setattr(request, PENDING_COUNT_ATTRIBUTE, found)
        return int(found)

    return {"pending_approvals": count}
