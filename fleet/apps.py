from django.apps import AppConfig


class FleetConfig(AppConfig):
    """The control room's view of the whole fleet: the overview's figures, Celery workers and
    queues, the task history and the Prometheus metrics."""

    name = "fleet"

    def ready(self) -> None:
        # Connecting Celery's signals is an import side effect of the module.
        from django.conf import settings

        from audit.services import on_events_committed
        from fleet import receivers  # noqa: F401
        from fleet.tasks import export_finished_runs

        # Finished runs are exported as traces (OTLP) when an endpoint is configured.
        if settings.AGENTOPS_OTEL_EXPORT:
            on_events_committed(export_finished_runs)
