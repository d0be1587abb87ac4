"""What the pages of runs and approvals share for projects: a view decorator checking the
user's role in the project of the object a URL names."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from projects.access import Access

# What it takes to see an object at all, by the permission an action needs: an object the user
# may not see is a 404 (as if it did not exist), one they see but may not act on a 403.
_VIEW_PERMISSION = {
    "runs": "runs.view_run",
    "approvals": "approvals.view_approvalrequest",
    "memory": "memory.view_memoryitem",
    "evals": "evals.view_caseset",
}

View = Callable[..., HttpResponse]


def object_permission(
    perm: str, project_of: Callable[[Any], int | None], kwarg: str
) -> Callable[[View], View]:
    """Decorate a page view whose URL argument ``kwarg`` is an object id: ``project_of(id)``
    gives its project (None: no such object). The user must hold ``perm`` there.

    Raises (from the decorated view):
        Http404: no such object, or one in a project the user may not see.
        PermissionDenied: the user sees it but their role there does not grant ``perm``.
    """
    view_perm = _VIEW_PERMISSION[perm.split(".")[0]]

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            access = Access(request.user)
            project_id = project_of(kwargs[kwarg])
            if project_id is None or not access.can(view_perm, project_id):
                raise Http404("not found")
            if not access.can(perm, project_id):
                raise PermissionDenied(f"your role in this project does not allow it ({perm})")
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
