"""Page routes of evals."""

from django.urls import path

from evals import views

urlpatterns = [
    path("evals/", views.case_set_list, name="eval-case-sets"),
    path("evals/case-sets/<int:pk>/", views.case_set_detail, name="eval-case-set"),
    path("evals/case-sets/<int:pk>/bulk/", views.case_set_bulk, name="eval-case-set-bulk"),
    path("evals/runs/<int:pk>/", views.eval_run_detail, name="eval-run"),
    path("evals/compare/", views.eval_run_compare, name="eval-compare"),
    path("runs/<uuid:run_id>/case/", views.case_make, name="eval-case-make"),
]
