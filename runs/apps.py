from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self) -> None:
        # Registering the built-in tools is an import side effect of their module.
        from runs import wakeups
        from runs.tasks import CeleryWakeups
        from runs.tools import builtin  # noqa: F401

        wakeups.install(CeleryWakeups())
