"""WebSocket routes (mounted by ``web.asgi`` behind origin validation and auth)."""

from django.urls import path

from approvals.consumers import ApprovalsConsumer
from runs.consumers import RunConsumer, RunsConsumer, SessionConsumer

websocket_urlpatterns = [
    path("ws/runs/", RunsConsumer.as_asgi(), name="ws-runs"),
    path("ws/runs/<uuid:run_id>/", RunConsumer.as_asgi(), name="ws-run"),
    path("ws/sessions/<uuid:session_id>/", SessionConsumer.as_asgi(), name="ws-session"),
    path("ws/approvals/", ApprovalsConsumer.as_asgi(), name="ws-approvals"),
]
