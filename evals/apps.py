from django.apps import AppConfig


class EvalsConfig(AppConfig):
    """Cases made from runs, case sets, and eval runs that replay a case set against an agent
    version (``evals.services``, ``evals.scoring``)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "evals"
    verbose_name = "Evals"
