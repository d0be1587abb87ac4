from django.apps import AppConfig


class GatewayConfig(AppConfig):
    """The MCP gateway: any MCP client's tool calls, through agentops, to upstream servers."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "gateway"
    verbose_name = "MCP gateway"

    def ready(self) -> None:
        # Each process keeps the requests it admitted (``gateway.admission``): any change to
        # what admitted them makes it check again.
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_delete, post_save

        from gateway.admission import credentials_changed
        from gateway.models import Upstream
        from projects.models import ApiToken, Membership

        for model in (ApiToken, Membership, get_user_model(), Upstream):
            uid = f"gateway-credentials-{model.__name__}"
            post_save.connect(credentials_changed, sender=model, dispatch_uid=uid)
            post_delete.connect(credentials_changed, sender=model, dispatch_uid=f"{uid}-")
