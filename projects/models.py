"""Projects, memberships and project-scoped API tokens."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from knox.models import AbstractAuthToken

from projects.roles import Role

DEFAULT_PROJECT_SLUG = "default"


class Project(models.Model):  # type: ignore[django-manager-missing]  # knox's abstract token
    """A team's space: every run belongs to one, and people see and act on a run only through
    their membership of its project (``projects.access``).

    Its policy (risk rules with their approval policies, its tool ``grant``) is its own, on
    top of the global defaults, and changed only by its admins through the services that
    record each change in its audit chain (``runs.policy``); ``policy_version`` counts those
    changes, and each step records the version it was classified under. ``grant`` is the
    tool grant every call of its runs must keep to (``agentops.grants``; None: no limit).
    """

    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=100)
    grant = models.JSONField(null=True, blank=True, editable=False)
    policy_version = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


def default_project_id() -> int:
    """The id of the ``default`` project, created on first use: where a run created without
    naming a project goes."""
    project, _ = Project.objects.get_or_create(
        slug=DEFAULT_PROJECT_SLUG, defaults={"name": "Default"}
    )
    return project.pk


class Membership(models.Model):
    """``user`` is a member of ``project`` with one ``role`` (``projects.roles.Role``)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_once")]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.project}"


class ApiToken(AbstractAuthToken):
    """An API token of a client app (django-rest-knox's token, ``KNOX_TOKEN_MODEL``): only
    the SHA-512 ``digest`` and the first characters (``token_key``) are stored, the token itself
    is shown once when created. It acts as its user, inside ``project`` only, until ``expiry``
    (None: never) or until revoked (deleted). ``grant`` (``agentops.grants``; None: no
    limit) bounds the tools every run it creates may call."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100, blank=True, help_text="What the token is for.")
    grant = models.JSONField(
        null=True,
        blank=True,
        help_text='The tools its runs may call, e.g. {"tools": ["get_*", "book_*"], '
        '"constraints": {"book_*": "amount <= 500"}}; empty: any tool.',
    )

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.token_key}… {self.name or 'token'} of {self.user} in {self.project}"
