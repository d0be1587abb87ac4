from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit log"

    def ready(self) -> None:
        """Record changes of users, roles and logins in the system chain (``audit.receivers``)."""
        from audit import receivers

        receivers.connect()
