from django.apps import AppConfig


class GatewayConfig(AppConfig):
    """The MCP gateway: any MCP client's tool calls, through agentops, to upstream servers."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "gateway"
    verbose_name = "MCP gateway"
