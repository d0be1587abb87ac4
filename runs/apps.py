from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self) -> None:
        # Registering the built-in tools (and the error forms of the τ-bench tools that
        # transcript runs replay) is an import side effect of their modules.
        from runs import wakeups
        from runs.control.compaction import load_summarizer
        from runs.tasks import CeleryWakeups
        from runs.tools import builtin, tau_bench  # noqa: F401

        wakeups.install(CeleryWakeups())
        # A summarizer setting that names nothing fails the start, not the first compaction.
        load_summarizer()
