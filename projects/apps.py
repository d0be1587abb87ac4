from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    """Projects, their members' roles and the API tokens scoped to them."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "projects"

    def ready(self) -> None:
        from projects import schema  # noqa: F401  (registers the token's OpenAPI scheme)
