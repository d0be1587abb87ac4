from django.apps import AppConfig


class FleetConfig(AppConfig):
    """The control room's view of the whole fleet: the overview's figures, Celery workers and
    queues, the task history and the Prometheus metrics."""

    name = "fleet"

    def ready(self) -> None:
        # Connecting Celery's signals is an import side effect of the module.
        from fleet import receivers  # noqa: F401
