from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    """Projects, their members' roles and the API tokens scoped to them."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "projects"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_delete, post_save

        from agentops.tokens import credentials_changed
        from projects import schema  # noqa: F401  (registers the token's OpenAPI scheme)
        from projects.models import ApiToken, Membership, Project

        # Each process keeps the API tokens it checked, with their projects
        # (``agentops.tokens``): any change to a token, a membership, a user or a project
        # makes it check them again.
        for model in (ApiToken, Membership, get_user_model(), Project):
            uid = f"credentials-{model.__name__}"
            post_save.connect(credentials_changed, sender=model, dispatch_uid=uid)
            post_delete.connect(credentials_changed, sender=model, dispatch_uid=f"{uid}-")
