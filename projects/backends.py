"""Django authentication backend answering ``user.has_perm`` from project memberships.

``has_perm(perm, obj)`` with an object that has a ``project_id`` (a run, a step's run, an
approval request's run): the user's role in that project. Without an object: whether some
project grants it (what a page needs to show a menu or accept a form before it knows the
object). API requests with a project-scoped token check ``projects.access.Access`` instead,
which also knows the token.
"""

from __future__ import annotations

from typing import Any

from projects.access import Access
from projects.roles import PROJECT_PERMISSIONS


def project_of(obj: Any) -> int | None:
    """The project id of ``obj``: its own ``project_id``, else its run's."""
    if hasattr(obj, "project_id"):
        return obj.project_id
    run = getattr(obj, "run", None)
    return getattr(run, "project_id", None)


class ProjectRoleBackend:
    """Grants the project permissions (``projects.roles``) of a user's memberships; knows
    nothing else (Django's ``ModelBackend`` keeps the admin's model permissions)."""

    def authenticate(self, request: Any, **credentials: Any) -> None:
        """Never authenticates anyone: this backend only answers permission checks."""
        return None

    def has_perm(self, user: Any, perm: str, obj: Any = None) -> bool:
        """See the module docstring; False for any permission no project role grants."""
        if perm not in PROJECT_PERMISSIONS:
            return False
        access = Access(user)
        if obj is None:
            return access.anywhere(perm)
        return access.can(perm, project_of(obj))
