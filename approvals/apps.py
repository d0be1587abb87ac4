from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        # The approval gate, the risk rules that send steps to it, and its rows' retention
        # plug into runs here: runs never imports this app. The notification sender (a task)
        # is installed here too: the services never import tasks.
        from approvals import notifications
        from approvals.retention import ApprovalRows
        from approvals.risk import ApprovalStepPolicy
        from approvals.services import ApprovalGate
        from approvals.tasks import CeleryNotificationSender
        from runs import gates, retention

        gates.register(ApprovalGate())
        gates.set_step_policy(ApprovalStepPolicy())
        retention.register_dependent_rows(ApprovalRows())
        notifications.install(CeleryNotificationSender())
