"""REST API routes of approval requests, included under ``/api/v1/``.

Names are prefixed ``api-`` (``api-approval-list``) so they never clash with the pages' routes.
"""

from rest_framework.routers import SimpleRouter

from approvals.api import ApprovalViewSet

router = SimpleRouter(use_regex_path=False)
router.register("approvals", ApprovalViewSet, basename="api-approval")

urlpatterns = router.urls
