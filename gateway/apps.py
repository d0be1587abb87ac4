from django.apps import AppConfig


class GatewayConfig(AppConfig):
    """The MCP gateway: any MCP client's tool calls, through agentops, to upstream servers."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "gateway"
    verbose_name = "MCP gateway"

    def ready(self) -> None:
        # Each process keeps the requests it admitted (``gateway.admission``) under the
        # credentials version, which tokens, memberships and users replace
        # (``ProjectsConfig.ready``); so does a change to an upstream.
        from django.db.models.signals import post_delete, post_save

        from agentops.tokens import credentials_changed
        from gateway.models import Upstream
        from gateway.retention import McpSessionRows
        from runs import retention

        uid = "credentials-Upstream"
        post_save.connect(credentials_changed, sender=Upstream, dispatch_uid=uid)
        post_delete.connect(credentials_changed, sender=Upstream, dispatch_uid=f"{uid}-")
        # An MCP session goes with its run when retention deletes the run.
        retention.register_dependent_rows(McpSessionRows())
