"""REST API routes of artifacts, included under ``/api/v1/`` (names prefixed ``api-``)."""

from rest_framework.routers import SimpleRouter

from artifacts.api import ArtifactViewSet

router = SimpleRouter(use_regex_path=False)
router.register("artifacts", ArtifactViewSet, basename="api-artifact")

urlpatterns = router.urls
