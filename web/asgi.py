"""ASGI entry point (``uvicorn web.asgi:application``, as ``scripts/start`` serves it): HTTP and
WebSocket routing."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
django_asgi_app = get_asgi_application()

from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.db import connections  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from agentops.celery import app as celery_app  # noqa: E402
from agentops.ws_auth import SessionOriginValidator, TokenAuthMiddlewareStack  # noqa: E402
from gateway.server import PREFIX as MCP_PREFIX  # noqa: E402
from gateway.server import gateway  # noqa: E402
from web.ws_routing import websocket_urlpatterns  # noqa: E402


def warm_up() -> None:
    """Do as the server starts what Django, Celery and Channels leave to a process's first
    request: import every view (the URLconf), finalize the Celery app and build its producer
    pool (which imports the broker's transport) and result backend, create the channel layer,
    and open the database pool, if any, in the background.

    The first run created in a new web process took 50-60 ms more CPU and 55-70 ms more time
    than the next ones without it, 20-30 ms more of each with it (``daphne``, a run of 25
    steps, after a first page; development machine, 2026-11-26). Waits for no connection: a
    database or Redis that is down does not keep the server from starting."""
    get_resolver().url_patterns  # noqa: B018 (the property imports the URLconf)
    celery_app.finalize(auto=True)
    celery_app.producer_pool  # noqa: B018 (the property builds the pool)
    celery_app.backend  # noqa: B018 (a thread's own, but the first one imports its class)
    get_channel_layer()
    pool = getattr(connections["default"], "pool", None)  # PostgreSQL's, when configured
    if pool is not None:
        pool.open(wait=False)  # connects in the background: a database that is down only logs


warm_up()


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
