"""What the REST API views of runs and approvals share for projects: the request's access
and a permission class that checks an action against the project of the object it acts on."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from agentops.errors import InvalidInput
from projects.access import Access
from projects.models import Project


def access_for(request: Any) -> Access:
    """The access of the request's user (and token scope), read once per request."""
    access = getattr(request, "_agentops_access", None)
    if access is None:
        access = Access.of(request.user, getattr(request, "auth", None))
        request._agentops_access = access
    return access


class ProjectActionPermissions(BasePermission):
    """Grant a viewset action when the user holds, in the project concerned, every permission
    listed for it.

    The view sets ``action_permissions = {"list": ("runs.view_run",), ...}`` (an empty tuple:
    any signed-in user; an action missing from the map is refused, so a new action is closed
    until someone says who may call it) and ``view_permission``, what it takes to see one of
    its objects. Without an object (list, create) the permissions must be held in some
    project: the view narrows its list and checks the project it creates in. With one (a
    detail route, ``pk``), the view's ``project_id_of(pk)`` names its project: an object the
    user may not see there is a 404, as if it did not exist; one they may see but not act on
    a 403 naming what is missing. Unauthenticated requests are refused (401).
    """

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False
        perms = getattr(view, "action_permissions", {}).get(getattr(view, "action", None))
        if perms is None:
            return False
        access = access_for(request)
        pk = view.kwargs.get("pk")
        if pk is None:
            return all(access.anywhere(perm) for perm in perms)
        project_id = view.project_id_of(pk)  # type: ignore[attr-defined]
        if project_id is None or not access.can(view.view_permission, project_id):  # type: ignore[attr-defined]
            raise exceptions.NotFound(view.not_found)  # type: ignore[attr-defined]
        missing = [perm for perm in perms if not access.can(perm, project_id)]
        if missing:
            raise exceptions.PermissionDenied(
                f"your role in this project does not allow it (needs {', '.join(missing)})"
            )
        return True


def project_id_for_create(access: Access, slug: str | None, perm: str) -> int:
    """The id of ``project_for_create``'s project, without reading the project when the
    request's token names it (no ``slug``): the token's project exists while the token does.

    Raises:
        as ``project_for_create``.
    """
    token_project = access.token_project_id
    if not slug and token_project is not None and access.can(perm, token_project):
        return token_project
    return int(project_for_create(access, slug, perm).pk)


def project_for_create(access: Access, slug: str | None, perm: str) -> Project:
    """The project a new object goes to: ``slug`` if given, else the token's project, else the
    user's only project where ``perm`` is granted.

    Raises:
        InvalidInput: ``slug`` names no project where ``perm`` is granted (or one outside the
            token's project), or none is given and the user has several to choose from.
        PermissionDenied: ``perm`` is granted in no project at all.
    """
    allowed = access.project_ids(perm)
    if slug:
        project = Project.objects.filter(slug=slug).first()
        if project is None or (allowed is not None and project.pk not in allowed):
            raise InvalidInput(f"no project {slug!r} where you may do this", field="project")
        return project
    if access.token_project_id is not None and access.can(perm, access.token_project_id):
        return access.token_project()
    choices = access.projects(perm)
    if len(choices) == 1:
        return choices[0]
    if not choices:
        raise exceptions.PermissionDenied("you may do this in no project")
    slugs = ", ".join(p.slug for p in choices)
    raise InvalidInput(f"name the project: one of {slugs}", field="project")
