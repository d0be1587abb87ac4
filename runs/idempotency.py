"""``Idempotency-Key`` on POST endpoints: a retried request gets the first response again.

The semantics follow the IETF draft "The Idempotency-Key HTTP Header Field"
(draft-ietf-httpapi-idempotency-key-header): the same key with the same request replays the
stored response (with ``Idempotent-Replayed: true``); the same key with a different request is
a 422; the same key while its first request is still being processed is a 409. Keys expire
after ``AGENTOPS_IDEMPOTENCY_TTL_SECONDS`` (default 24 h). A response of 500 or more is not
stored, so the client can retry with the same key.

A key belongs to the authenticated user in the project of the API token the request came with
(a session's request, a browser's, has no project): the same key with a token of another
project is another key, so one project's response is never replayed to a request made in
another. Scoped by project rather than by token, a key outlives the rotation of the token
that sent it: a client that rotated its token between a request and its retry gets the first
response again, as its tokens of one project act with the same rights.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any, cast

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from runs.models import IdempotencyKey, IdempotencyKeyStatus

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    HEADER,
    # Printable ASCII, neither starting nor ending with a space (HTTP strips those).
    type={
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_KEY_LENGTH,
        "pattern": "^[!-~]([ -~]*[!-~])?$",
    },
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "Makes a retried request safe: the same key and body replay the first response "
        "(header Idempotent-Replayed: true); the same key with another body is a 422; the "
        "same key while the first request is in flight is a 409. Keys last 24 h and belong "
        "to the user in the project of the token sent with them."
    ),
)


class KeyInFlight(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "a request with this Idempotency-Key is still being processed"
    default_code = "idempotency_key_in_flight"


class KeyReused(APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "this Idempotency-Key was already used for a different request"
    default_code = "idempotency_key_reused"


def request_fingerprint(request: Request) -> str:
    """SHA-256 hex of the method, path and canonical JSON (sorted keys) of the parsed body."""
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    text = f"{request.method} {request.path}\n{body}"
    return hashlib.sha256(text.encode()).hexdigest()


def _owner(request: Request) -> dict[str, Any]:
    """Whose keys the request's are: its user, and its API token's project (None without a
    token), as ``IdempotencyKey`` field values."""
    return {"user": request.user, "project_id": getattr(request.auth, "project_id", None)}


def _begin(owner: dict[str, Any], key: str, fingerprint: str) -> IdempotencyKey | None:
    """Reserve ``key`` of ``owner`` (``_owner``) for this request, or return the finished
    record to replay.

    Raises:
        KeyReused: the key belongs to a different request.
        KeyInFlight: the key's first request is still running.
    """
    now = timezone.now()
    expires = now + timedelta(seconds=settings.AGENTOPS_IDEMPOTENCY_TTL_SECONDS)
    with transaction.atomic():
        record = IdempotencyKey.objects.select_for_update().filter(**owner, key=key).first()
        if record is not None and record.expires_at <= now:
            record.delete()
            record = None
        if record is None:
            try:
                with transaction.atomic():
                    IdempotencyKey.objects.create(
                        **owner,
                        key=key,
                        fingerprint=fingerprint,
                        status=IdempotencyKeyStatus.IN_FLIGHT,
                        locked_at=now,
                        expires_at=expires,
                    )
            except IntegrityError:
                # Another request inserted the same key between our read and our insert.
                raise KeyInFlight() from None
            return None
        if record.fingerprint != fingerprint:
            raise KeyReused()
        if record.status == IdempotencyKeyStatus.DONE:
            return record
        stale = now - timedelta(seconds=settings.AGENTOPS_IDEMPOTENCY_LOCK_SECONDS)
        if record.locked_at > stale:
            raise KeyInFlight()
        # The request that held it died without an answer: this one takes the key over.
        record.locked_at = now
        record.save(update_fields=["locked_at"])
        return None


class _Unanswered(Exception):
    """A view answered 5xx: its writes roll back and its key is released."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _finish(owner: dict[str, Any], key: str, response: Response) -> None:
    records = IdempotencyKey.objects.filter(**owner, key=key)
    body = json.loads(JSONRenderer().render(response.data)) if response.data is not None else None
    records.update(
        status=IdempotencyKeyStatus.DONE,
        response_status=response.status_code,
        response_body=body,
    )


ViewMethod = Callable[..., Response]


def idempotent(view_method: ViewMethod) -> ViewMethod:
    """Decorate a DRF view method (POST) to honour the ``Idempotency-Key`` header.

    Without the header the view runs as usual. A key is 1 to 255 visible ASCII characters
    (else 400). With it, the view runs in one transaction with the storing of its answer: an
    exception or a 5xx rolls the view's writes back and releases the key, so a retry (or a
    corrected request) may reuse it and nothing is done twice.
    """

    @wraps(view_method)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER)
        if key is None:
            return view_method(self, request, *args, **kwargs)
        if not 0 < len(key) <= MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
            raise ValidationError(
                {HEADER: f"must be 1 to {MAX_KEY_LENGTH} visible ASCII characters"}
            )
        owner = _owner(request)
        record = _begin(owner, key, request_fingerprint(request))
        if record is not None:
            return Response(
                record.response_body,
                status=record.response_status,
                headers={"Idempotent-Replayed": "true"},
            )
        try:
            # The view's writes and the stored answer commit together: a request that dies
            # after its work is done but before its answer is stored leaves neither, so a
            # retry with the key does the work once, never twice.
            with transaction.atomic():
                response = view_method(self, request, *args, **kwargs)
                if response.status_code >= 500:
                    raise _Unanswered(response)
                _finish(owner, key, response)
        except _Unanswered as unanswered:
            IdempotencyKey.objects.filter(**owner, key=key).delete()
            return unanswered.response
        except BaseException:
            IdempotencyKey.objects.filter(**owner, key=key).delete()
            raise
        return response

    return wrapper


def idempotency_keys_purge() -> int:
    """Delete keys past ``expires_at``; returns how many (retention, run by the sweeper)."""
    deleted, _ = IdempotencyKey.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted


def idempotent_action(
    *, summary: str, request: Any, responses: dict[int, Any], **options: Any
) -> Callable[[ViewMethod], ViewMethod]:
    """Decorate a DRF view method as a POST action on one object (``action(detail=True,
    methods=["post"], **options)``, e.g. ``url_path``) that honours the ``Idempotency-Key``
    header (``idempotent``), documented with ``summary``, the request serializer ``request``,
    the header and ``responses`` (status code: serializer or ``OpenApiResponse``)."""

    def decorate(view_method: ViewMethod) -> ViewMethod:
        schema = extend_schema(
            summary=summary,
            parameters=[IDEMPOTENCY_KEY_PARAMETER],
            request=request,
            responses=responses,
        )
        posted = action(detail=True, methods=["post"], **options)(idempotent(view_method))
        return cast(ViewMethod, schema(posted))

    return decorate
