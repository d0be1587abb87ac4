"""REST API routes of evals, included under ``/api/v1/``."""

from django.urls import path

from evals import api

urlpatterns = [
    path("evals/case-sets/", api.CaseSetsView.as_view(), name="api-case-sets"),
    path("evals/case-sets/<int:pk>/cases/", api.CaseSetCasesView.as_view(), name="api-cases"),
    path(
        "evals/case-sets/<int:pk>/cases/bulk/",
        api.CaseSetBulkView.as_view(),
        name="api-cases-bulk",
    ),
    path(
        "evals/case-sets/<int:pk>/import/",
        api.CaseSetImportView.as_view(),
        name="api-cases-import",
    ),
    path(
        "evals/case-sets/<int:pk>/export/",
        api.CaseSetExportView.as_view(),
        name="api-cases-export",
    ),
    path("evals/cases/<int:pk>/", api.CaseView.as_view(), name="api-case"),
    path("evals/runs/", api.EvalRunsView.as_view(), name="api-eval-runs"),
    path("evals/runs/<int:pk>/", api.EvalRunView.as_view(), name="api-eval-run"),
]
