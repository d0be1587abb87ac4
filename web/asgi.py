"""ASGI entry point (``daphne web.asgi:application``): HTTP and WebSocket routing."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agentops.ws_auth import SessionOriginValidator, TokenAuthMiddlewareStack  # noqa: E402
from gateway.server import PREFIX as MCP_PREFIX  # noqa: E402
from gateway.server import gateway  # noqa: E402
from web.ws_routing import websocket_urlpatterns  # noqa: E402


async def http(scope, receive, send):
    """Django, but the MCP gateway for ``/mcp/<upstream>/`` (``gateway.server``)."""
    if scope["path"].startswith(MCP_PREFIX):
        return await gateway(scope, receive, send)
    return await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": SessionOriginValidator(
            TokenAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
