"""The Content-Security-Policy header on every response (Django 5.2 has none built in).

The pages load only the project's own scripts, styles and images (vendored under
``static/``; the API docs from drf-spectacular-sidecar) and open WebSockets to the same host;
no inline script runs, so an injected ``<script>`` or ``onclick`` does nothing. Inline
``style`` attributes stay allowed (the admin uses them; they cannot run code).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

DEFAULT_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self' ws: wss:; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    """Adds ``Content-Security-Policy: settings.AGENTOPS_CSP`` to responses that have none."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.AGENTOPS_CSP
        return response
