"""REST API routes of approval requests, included under ``/api/v1/``.

Names are prefixed ``api-`` (``api-approval-list``) so they never clash with the pages' routes.
"""

from django.urls import path
from rest_framework.routers import SimpleRouter

from approvals.api import ApprovalViewSet
from approvals.policy_api import GrantView, PolicyView, RiskRulesView, RiskRuleView

router = SimpleRouter(use_regex_path=False)
router.register("approvals", ApprovalViewSet, basename="api-approval")

_POLICY = "projects/<slug:slug>/policy/"
urlpatterns = [
    *router.urls,
    path(_POLICY, PolicyView.as_view(), name="api-policy"),
    path(f"{_POLICY}grant/", GrantView.as_view(), name="api-policy-grant"),
    path(f"{_POLICY}risk-rules/", RiskRulesView.as_view(), name="api-policy-rules"),
    path(f"{_POLICY}risk-rules/<int:rule_id>/", RiskRuleView.as_view(), name="api-policy-rule"),
]
