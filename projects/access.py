"""Who may do what in which project: the one place membership and token scope are read.

A user's rights in a project are those of their role there (``projects.roles``); superusers
hold every right in every project. A request made with an API token (``ApiToken``) is confined
to the token's project: it holds there what its user holds, and nothing elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from projects.models import ApiToken, Membership, Project
from projects.roles import ROLE_PERMISSIONS

_CACHE = "_agentops_project_roles"


def _memberships(user_id: int) -> dict[int, str]:
    """``{project id: role}`` of the memberships of user ``user_id`` (a ``Membership`` row
    each)."""
    return dict(Membership.objects.filter(user_id=user_id).values_list("project_id", "role"))


@dataclass
class Access:
    """The rights of ``user``, confined to the project of ``token`` when the request came
    with a project-scoped token (``token_project_id``). Memberships are read once, on first
    use."""

    user: Any
    token: ApiToken | None = field(default=None, repr=False)
    _roles: dict[int, str] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, user: Any, auth: Any = None) -> Access:
        """The access of ``user`` authenticated with ``auth`` (DRF's ``request.auth``: an
        ``ApiToken`` confines it to the token's project; a session's None does not)."""
        return cls(user, auth if isinstance(auth, ApiToken) else None)

    @property
    def token_project_id(self) -> int | None:
        """The project the request's token confines it to; None without a token."""
        return None if self.token is None else self.token.project_id

    def token_project(self) -> Project:
        """The project of the request's token, as the token's check read it
        (``agentops.tokens`` keeps it with the token, current while the credentials version
        is: no query), else read now.

        Raises:
            ValueError: the request came without a token.
        """
        if self.token is None:
            raise ValueError("the request came without a token")
        return self.token.project

    @property
    def _active(self) -> bool:
        return bool(self.user is not None and self.user.is_authenticated and self.user.is_active)

    def roles(self) -> dict[int, str]:
        """``{project id: role}`` of the user's memberships (within the token's project)."""
        if self._roles is None:
            if not self._active:
                self._roles = {}
            else:
                # Kept on the user object, as Django's ModelBackend keeps its permissions: a
                # page asks several times (a decorator, its list, its template's buttons).
                every = getattr(self.user, _CACHE, None)
                if every is None:
                    every = _memberships(self.user.pk)
                    setattr(self.user, _CACHE, every)
                scope = self.token_project_id
                self._roles = {p: r for p, r in every.items() if scope in (None, p)}
        return self._roles

    @property
    def unconfined(self) -> bool:
        """True for a superuser without a token scope: every project, every right."""
        return bool(self._active and self.user.is_superuser and self.token_project_id is None)

    def can(self, perm: str, project_id: int | None) -> bool:
        """Whether ``perm`` (``app_label.codename``) is granted in the project ``project_id``
        (None, an object of no project: superusers only)."""
        if not self._active:
            return False
        if project_id is None:
            return self.unconfined
        if self.user.is_superuser:
            return self.token_project_id in (None, project_id)
        role = self.roles().get(project_id)
        return role is not None and perm in ROLE_PERMISSIONS[role]

    def project_ids(self, perm: str) -> list[int] | None:
        """The ids of the projects where ``perm`` is granted; None means every project (an
        unconfined superuser): callers filter with it unless it is None."""
        if self.unconfined:
            return None
        if self._active and self.user.is_superuser:
            return [self.token_project_id] if self.token_project_id is not None else []
        return sorted(pid for pid, role in self.roles().items() if perm in ROLE_PERMISSIONS[role])

    def anywhere(self, perm: str) -> bool:
        """Whether ``perm`` is granted in at least one project."""
        ids = self.project_ids(perm)
        return ids is None or bool(ids)

    def projects(self, perm: str) -> list[Project]:
        """The projects where ``perm`` is granted, by slug."""
        ids = self.project_ids(perm)
        qs = Project.objects.all() if ids is None else Project.objects.filter(pk__in=ids)
        return list(qs.order_by("slug"))

    def scope(self, queryset: Any, perm: str, field_name: str = "project_id") -> Any:
        """``queryset`` narrowed to the rows whose ``field_name`` is a project where ``perm``
        is granted."""
        ids = self.project_ids(perm)
        return queryset if ids is None else queryset.filter(**{f"{field_name}__in": ids})
