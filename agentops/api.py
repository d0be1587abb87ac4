"""What every REST API view shares: error translation, permissions, pagination, the actor.

Services raise domain errors (``agentops.errors``, django-fsm's, ``DoesNotExist``, Django's
``PermissionDenied``); ``exception_handler`` turns them into the API's status codes so views
never catch them one by one:

- ``InvalidInput`` → 400 ``{"detail": str, "field": str}``
- ``PermissionDenied`` → 403 ``{"detail": str}`` (the service's reason kept)
- ``Model.DoesNotExist`` → 404 ``{"detail": str}``
- ``Conflict``, ``TransitionNotAllowed``, ``ConcurrentTransition`` → 409 ``{"detail": str}``
  (plus ``"status"``, the object's current status, for a refused transition)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django_fsm import ConcurrentTransition, TransitionNotAllowed
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput


def _not_found_detail(exc: ObjectDoesNotExist) -> str:
    # ``Run.DoesNotExist`` has the qualified name "Run.DoesNotExist".
    model = type(exc).__qualname__.split(".")[0]
    if model == "ObjectDoesNotExist":
        return "not found"
    if model == "ApprovalRequest":
        return "approval request not found"
    return f"{model.lower()} not found"


def _transition_detail(exc: TransitionNotAllowed) -> tuple[str, str | None]:
    obj = exc.object
    if obj is None:
        return str(exc), None
    current = str(obj.status)
    name = str(obj._meta.verbose_name)
    action = getattr(exc.method, "__name__", "change")
    return f"{name} is {current}: cannot {action.replace('_', ' ')} it now", current


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``) for domain errors.

    Falls back to DRF's own handler for its exceptions; returns None (a 500) for the rest.
    """
    if isinstance(exc, InvalidInput):
        return Response(
            {"detail": exc.message, "field": exc.field}, status=status.HTTP_400_BAD_REQUEST
        )
    if isinstance(exc, Conflict):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, TransitionNotAllowed):
        detail, current = _transition_detail(exc)
        body: dict[str, Any] = {"detail": detail}
        if current is not None:
            body["status"] = current
        return Response(body, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ConcurrentTransition):
        return Response(
            {"detail": f"changed by another request meanwhile, reload and retry ({exc})"},
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, ObjectDoesNotExist):
        return Response({"detail": _not_found_detail(exc)}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, DjangoPermissionDenied) and str(exc):
        exc = exceptions.PermissionDenied(str(exc))
    return drf_exception_handler(exc, context)


def actor_for(request: Request) -> Actor:
    """The actor of an authenticated API request: an API client when it came with a token,
    the person otherwise (session, i.e. the browser)."""
    via_api = isinstance(request.successful_authenticator, KnoxTokenAuthentication)
    return Actor.for_user(request.user, via_api=via_api)


class NewestFirstPagination(CursorPagination):
    """Cursor pages, newest ``created_at`` first (id breaks ties); ``?page_size=`` up to 200."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class OldestFirstPagination(NewestFirstPagination):
    """Cursor pages, oldest ``created_at`` first: a reviewer's queue order."""

    ordering = ("created_at", "id")


class StrictSerializer(serializers.Serializer):
    """An input serializer that refuses keys it does not declare (400 naming them), instead of
    silently dropping them; applies to nested serializers and each item of ``many=True``."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({key: ["unknown field"] for key in unknown})
        return super().to_internal_value(data)


class ErrorSerializer(serializers.Serializer):
    """An error response: ``detail`` says why; ``field`` names the bad input, when one."""

    detail = serializers.CharField()
    field = serializers.CharField(required=False)
    status = serializers.CharField(required=False, help_text="Current status (409 only).")
