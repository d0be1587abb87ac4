from importlib import import_module

from django.apps import AppConfig
from django.conf import settings


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self) -> None:
        # Registering the built-in tools (and the error forms of the τ-bench tools that
        # transcript runs replay) is an import side effect of their modules.
        from artifacts.retention import ArtifactRows
        from audit.services import audit_use_statements
        from memory.retention import MemoryProvenanceRows
        from memory.rows import memory_use_rows
        from runs import retention, wakeups
        from runs.control.compaction import load_summarizer
        from runs.control.compensation import compensate_after_failure
        from runs.executor.finish import on_run_failed
        from runs.store.audit import RowStatements
        from runs.store.memory import SeamItemRows
        from runs.tasks import CeleryWakeups
        from runs.tools import builtin, memory, tau_bench  # noqa: F401

        wakeups.install(CeleryWakeups())
        # A run whose policy says so is compensated in the transaction that fails it.
        on_run_failed(compensate_after_failure)
        # Retention deletes a run's artifacts with it (the files after the commit).
        retention.register_dependent_rows(ArtifactRows())
        # Run retention unlinks the memory items whose provenance names what it deletes.
        retention.register_dependent_rows(MemoryProvenanceRows())
        # The audit writer's statements go through the persistence seam: pipelined with the
        # executor's own writes inside ``pipelined_atomic``.
        audit_use_statements(RowStatements())
        # Memory's puts go through it too: their locks in one round trip, their writes in one.
        memory_use_rows(SeamItemRows())
        # A summarizer setting that names nothing fails the start, not the first compaction.
        load_summarizer()
        # The agent state migrations a state schema may name register as their modules load.
        for module in settings.AGENTOPS_STATE_MIGRATION_MODULES:
            import_module(module)
        # A deployment's own tools (and their compensations) register as their modules load.
        for module in settings.AGENTOPS_TOOL_MODULES:
            import_module(module)
