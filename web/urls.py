"""URL routes: pages, the REST API (``/api/v1/``), its OpenAPI schema and Django admin."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from agentops.api import not_found

# Under /api/, a path no route matches answers the API's JSON error, not an HTML page.
handler404 = not_found

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: no inline script (CSP).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include("runs.api_urls")),
    path("api/v1/", include("approvals.api_urls")),
    path("api/v1/", include("memory.api_urls")),
    path("api/v1/", include("artifacts.api_urls")),
    path("api/v1/", include("evals.api_urls")),
    path("", include("runs.urls")),
    path("", include("approvals.urls")),
    path("", include("fleet.urls")),
    path("", include("memory.urls")),
    path("", include("artifacts.urls")),
    path("", include("evals.urls")),
]
