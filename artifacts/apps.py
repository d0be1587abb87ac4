from django.apps import AppConfig


class ArtifactsConfig(AppConfig):
    """Files agents and tools produce (``artifacts.models.Artifact``): stored through Django's
    storage API, served only through agentops with the run's project permissions."""

    name = "artifacts"
    default_auto_field = "django.db.models.BigAutoField"
