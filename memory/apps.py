from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """The memory store: what agents recall across runs and sessions (issue 33, items 1-3)."""

    name = "memory"
