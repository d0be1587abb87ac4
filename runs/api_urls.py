"""REST API routes of runs and tools, included under ``/api/v1/``.

Names are prefixed ``api-`` (``api-run-list``) so they never clash with the pages' routes.
Run and session ids are matched as UUIDs, so a malformed id is a 404 before any view runs.
"""

from rest_framework.routers import SimpleRouter

from runs.api import RunViewSet, ToolViewSet
from runs.sessions_api import SessionViewSet, SubjectViewSet
from runs.state_api import StateSchemaViewSet

router = SimpleRouter(use_regex_path=False)
router.register("runs", RunViewSet, basename="api-run")
router.register("tools", ToolViewSet, basename="api-tool")
router.register("state-schemas", StateSchemaViewSet, basename="api-state-schema")
router.register("sessions", SessionViewSet, basename="api-session")
router.register("subjects", SubjectViewSet, basename="api-subject")

urlpatterns = router.urls
