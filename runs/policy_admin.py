"""Admin for policy objects a project may own (MCP upstreams, retention policies): each add,
change and delete in admin is also a change of the policy of the project the object belongs
to, or belonged to (``runs.policy.owned_change_recorded``), in the same transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest

from agentops.actors import Actor
from audit.services import audited_atomic
from runs.policy import owned_change_recorded


class OwnedPolicyAdminMixin:
    """Put before the ``ModelAdmin`` (and its audit mixin) of a model with a ``project``:
    ``policy_kind`` names the object in its audit events (``policy.<kind>_changed``) and
    ``policy_json`` gives its JSON (its before and after)."""

    policy_kind = ""
    policy_json: Callable[[Any], dict[str, Any]]

    def _recorded(self, request: HttpRequest, obj: Any, *, before: Any, after: Any) -> None:
        owned_change_recorded(
            actor=Actor.for_user(request.user),
            kind=self.policy_kind,
            object_id=obj.pk,
            before=before,
            after=after,
            as_json=type(self).policy_json,
        )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        before = type(obj).objects.filter(pk=obj.pk).first() if change else None
        with audited_atomic():
            super().save_model(request, obj, form, change)  # type: ignore[misc]
            self._recorded(request, obj, before=before, after=obj)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with audited_atomic():
            self._recorded(request, obj, before=obj, after=None)
            super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)
