"""What every REST API view shares: error translation, permissions, pagination, the actor.

Services raise domain errors (``agentops.errors``, django-fsm's, ``DoesNotExist``, Django's
``PermissionDenied``); ``exception_handler`` turns them into the API's status codes so views
never catch them one by one:

- ``InvalidInput`` → 400 ``{"detail": str, "field": str}`` (``TooLarge``: 413, same body)
- ``PreconditionFailed`` → 412 ``{"detail": str, "version": int}`` with the current ``ETag``
- DRF's ``ValidationError`` (serializers, filters, headers) → the same 400 shape: ``detail``
  lists every problem as ``"<field>: <message>"`` (``; ``-separated), ``field`` names the
  first (``steps[0].tool``, ``budget.max_tokens``), so a client reads one error format
- ``PermissionDenied`` → 403 ``{"detail": str}`` (the service's reason kept)
- ``Model.DoesNotExist`` → 404 ``{"detail": str}``
- ``Conflict``, ``TransitionNotAllowed``, ``ConcurrentTransition`` → 409 ``{"detail": str}``
  (plus ``"status"``, the object's current status, for a refused transition)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.dateparse import parse_datetime
from django.views.defaults import page_not_found
from django_filters import rest_framework as filters
from django_fsm import ConcurrentTransition, TransitionNotAllowed
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput, PreconditionFailed, TooLarge
from agentops.serializers import FieldsBuiltOnce

_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _is_timestamp(text: str) -> bool:
    # A cursor's position is the ``created_at`` of a row, as ``str()`` renders it.
    try:
        moment = parse_datetime(text)
    except ValueError:
        return False
    return moment is not None and moment.tzinfo is not None


def _not_found_detail(exc: ObjectDoesNotExist) -> str:
    # ``Run.DoesNotExist`` has the qualified name "Run.DoesNotExist".
    model = type(exc).__qualname__.split(".")[0]
    if model == "ObjectDoesNotExist":
        return "not found"
    if model == "ApprovalRequest":
        return "approval request not found"
    if model == "StateVersion":
        return "state version not found"
    return f"{model.lower()} not found"


def _transition_detail(exc: TransitionNotAllowed) -> tuple[str, str | None]:
    obj = exc.object
    if obj is None:
        return str(exc), None
    current = str(obj.status)
    name = str(obj._meta.verbose_name)
    action = getattr(exc.method, "__name__", "change")
    return f"{name} is {current}: cannot {action.replace('_', ' ')} it now", current


def _validation_problems(detail: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """``(field, message)`` for every message of a ``ValidationError``'s ``detail`` (nested
    dicts of fields, lists of messages, lists of items' errors, ``{index: errors}`` of a
    ``ListField``), the field as a path: ``steps[0].tool``."""
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            if key == api_settings.NON_FIELD_ERRORS_KEY:
                path = where
            elif isinstance(key, int):
                path = f"{where}[{key}]"
            else:
                path = f"{where}.{key}" if where else str(key)
            yield from _validation_problems(value, path)
    elif isinstance(detail, list) and any(isinstance(item, Mapping | list) for item in detail):
        for index, item in enumerate(detail):
            yield from _validation_problems(item, f"{where}[{index}]")
    elif isinstance(detail, list):
        for message in detail:
            yield where, str(message)
    else:
        yield where, str(detail)


def _validation_error_body(exc: exceptions.ValidationError) -> dict[str, str]:
    problems = list(_validation_problems(exc.detail)) or [("", "invalid input")]
    detail = "; ".join(f"{field}: {message}" if field else message for field, message in problems)
    return {"detail": detail, "field": problems[0][0]}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``) for domain errors.

    Falls back to DRF's own handler for its exceptions; returns None (a 500) for the rest.
    """
    if isinstance(exc, InvalidInput):
        code = (
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
            if isinstance(exc, TooLarge)
            else status.HTTP_400_BAD_REQUEST
        )
        return Response({"detail": exc.message, "field": exc.field}, status=code)
    if isinstance(exc, PreconditionFailed):
        return Response(
            {"detail": exc.message, "version": exc.version},
            status=status.HTTP_412_PRECONDITION_FAILED,
            headers={"ETag": exc.etag},
        )
    if isinstance(exc, exceptions.ValidationError):
        return Response(_validation_error_body(exc), status=status.HTTP_400_BAD_REQUEST)
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


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 handler (``handler404``): under ``/api/`` the API's JSON error
    (``{"detail": "not found"}``, for a path no route matches, such as a run id that is not a
    UUID), elsewhere Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "not found"}, status=status.HTTP_404_NOT_FOUND)
    return page_not_found(request, exception)


def actor_for(request: Request) -> Actor:
    """The actor of an authenticated API request: an API client when it came with a token,
    the person otherwise (session, i.e. the browser)."""
    via_api = isinstance(request.successful_authenticator, KnoxTokenAuthentication)
    return Actor.for_user(request.user, via_api=via_api)


class StrictFilterSet(filters.FilterSet):
    """A filter set that refuses a filter given without a value (``?status=``: 400 naming it)
    instead of ignoring it, as it refuses a value that is not one of the choices."""

    def is_valid(self) -> bool:
        """Whether every filter given has a valid, non-empty value (errors in ``errors``)."""
        valid = super().is_valid()
        for name in self.filters:
            if name in self.data and self.data.get(name) == "":
                self.form.add_error(name, "may not be empty: leave the filter out for all")
                valid = False
        return valid


class NewestFirstPagination(CursorPagination):
    """Cursor pages, newest ``created_at`` first (id breaks ties); ``?page_size=`` up to 200.

    A ``?cursor=`` that is not one this class encoded (not base64, bad offset or direction, a
    position that is not an aware ``created_at`` timestamp) is a 400 naming ``cursor``, never
    a query that fails in the database.
    """

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    invalid_cursor_message = "not a cursor of this list: pass a next or previous link's as is"

    def get_page_size(self, request: Request) -> int:
        """``?page_size=`` (default ``page_size``).

        Raises:
            ValidationError: not a whole number from 1 to ``max_page_size`` (400), where DRF
                would silently use the default instead.
        """
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= self.max_page_size):
            problem = f"must be a whole number from 1 to {self.max_page_size}"
            raise exceptions.ValidationError({self.page_size_query_param: problem})
        return int(raw)

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        """``cursor`` and ``page_size`` (1 to ``max_page_size``), as the OpenAPI schema shows
        them."""
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": self.max_page_size,
                }
        return parameters

    def decode_cursor(self, request: Request) -> Cursor | None:
        """The request's cursor, or None when it has none.

        Raises:
            ValidationError: the cursor was not made by ``encode_cursor`` (400).
        """
        invalid = exceptions.ValidationError({self.cursor_query_param: self.invalid_cursor_message})
        encoded = request.query_params.get(self.cursor_query_param)
        # DRF's decoding skips characters that are not base64 ("%%%" reads as no cursor).
        if encoded is not None and not _BASE64.fullmatch(encoded):
            raise invalid
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound:
            raise invalid from None
        if (
            cursor is not None
            and cursor.position is not None
            and not _is_timestamp(str(cursor.position))
        ):
            raise invalid
        return cursor


class OldestFirstPagination(NewestFirstPagination):
    """Cursor pages, oldest ``created_at`` first: a reviewer's queue order."""

    ordering = ("created_at", "id")


class StrictSerializer(FieldsBuiltOnce):
    """An input serializer that refuses keys it does not declare (400 naming them), instead of
    silently dropping them; applies to nested serializers and each item of ``many=True``.
    Its fields are built once per class (``FieldsBuiltOnce``)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({key: ["unknown field"] for key in unknown})
        return super().to_internal_value(data)


class PreconditionRequired(exceptions.APIException):
    """A write that must name the version it was made against came without ``If-Match``
    (HTTP 428, RFC 6585 §3)."""

    status_code = 428
    default_detail = "If-Match is required: the ETag of the version this write was made against"
    default_code = "precondition_required"


class ErrorSerializer(serializers.Serializer):
    """An error response: ``detail`` says why; ``field`` names the bad input, when one."""

    detail = serializers.CharField()
    field = serializers.CharField(required=False)
    status = serializers.CharField(required=False, help_text="Current status (409 only).")
    version = serializers.IntegerField(required=False, help_text="Current version (412 only).")
