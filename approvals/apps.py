from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        # The approval gate, the risk rules that send steps to it, and its rows' retention
        # plug into runs here: runs never imports this app. The notification sender (a task)
        # is installed here too: the services never import tasks.
        from django.contrib.auth.models import Group
        from django.db.models.signals import post_delete, post_save

        from approvals import notifications
        from approvals.conditions import holds
        from approvals.models import RiskRule
        from approvals.retention import ApprovalRows
        from approvals.risk import ApprovalStepPolicy, rules_changed
        from approvals.services import ApprovalGate
        from approvals.tasks import CeleryNotificationSender
        from runs import gates, retention
        from runs.tools import use_condition

        gates.register(ApprovalGate())
        # Validators' conditions on results are written in the risk rules' language.
        use_condition(holds)
        gates.set_step_policy(ApprovalStepPolicy())
        retention.register_dependent_rows(ApprovalRows())
        notifications.install(CeleryNotificationSender())
        # Risk rules are kept per process (``approvals.risk.load_rules``); their groups' names
        # are part of them.
        for model in (RiskRule, Group):
            post_save.connect(rules_changed, sender=model, dispatch_uid=f"rules-{model.__name__}")
            post_delete.connect(
                rules_changed, sender=model, dispatch_uid=f"rules-{model.__name__}-"
            )
