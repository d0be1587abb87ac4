"""Middleware that makes the request's user the actor of audit events recorded while it is
served by code that is not handed an actor (the user, role and login receivers)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from audit.context import acting_request


class AuditActorMiddleware:
    """Sets ``audit.context``'s request for the rest of the chain and the view; place it after
    ``AuthenticationMiddleware``. The user is only looked up when an event is recorded."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with acting_request(request):
            return self.get_response(request)
