"""Writes of projects, memberships and API tokens."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from agentops.errors import InvalidInput
from agentops.grants import parse_grant
from projects.models import ApiToken, Membership, Project, default_project_id
from projects.roles import Role


def project_default() -> Project:
    """The ``default`` project (created on first use): where runs of a single-team install
    and the runs that predate projects live."""
    return Project.objects.get(pk=default_project_id())


def membership_set(*, project: Project, user: Any, role: str) -> Membership:
    """Make ``user`` a member of ``project`` with ``role`` (a ``Role`` value), replacing any
    role they had there.

    Raises:
        InvalidInput: ``role`` is no project role.
    """
    if role not in Role.values:
        raise InvalidInput(f"{role!r} is not a role: one of {', '.join(Role.values)}", field="role")
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": role}
    )
    return membership


def token_create(
    *,
    user: Any,
    project: Project,
    name: str = "",
    ttl_seconds: int | None = None,
    grant: Any = None,
) -> tuple[ApiToken, str]:
    """A new API token for ``user`` confined to ``project``; returns the stored token and the
    token text, which is shown once and never stored (only its SHA-512 digest is).

    ``ttl_seconds``: seconds until it expires; None takes ``AGENTOPS_TOKEN_TTL_SECONDS``
    (0 there: never expires). ``grant``: the tools the runs it creates may call
    (``agentops.grants.parse_grant``; None: any).

    Raises:
        InvalidInput: ``user`` is not a member of ``project`` (superusers excepted),
            ``ttl_seconds`` is not positive, or ``grant`` is malformed.
    """
    grant = parse_grant(grant)
    if ttl_seconds is None:
        ttl_seconds = settings.AGENTOPS_TOKEN_TTL_SECONDS or None
    elif ttl_seconds <= 0:
        raise InvalidInput("a token's lifetime must be a positive number of seconds", field="ttl")
    if not user.is_superuser and not Membership.objects.filter(project=project, user=user).exists():
        raise InvalidInput(f"{user} is not a member of project {project}", field="project")
    expiry = timedelta(seconds=ttl_seconds) if ttl_seconds else None
    return _create(user, project, name, expiry, grant)


def _create(
    user: Any, project: Project, name: str, expiry: timedelta | None, grant: Any = None
) -> tuple[ApiToken, str]:
    with transaction.atomic():
        return ApiToken.objects.create(user, expiry, project=project, name=name, grant=grant)


def token_rotate(*, token: ApiToken) -> tuple[ApiToken, str]:
    """Replace ``token`` by a new one with the same user, project, name and lifetime; the old
    one stops working at once. Returns the new token and its text (shown once)."""
    lifetime = None if token.expiry is None else token.expiry - token.created
    with transaction.atomic():
        new = _create(token.user, token.project, token.name, lifetime, token.grant)
        token.delete()
    return new
