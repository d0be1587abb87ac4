"""Page routes of runs and sessions, and the login and logout pages every page relies on."""

from django.contrib.auth import views as auth_views
from django.urls import path

from runs import action_views, list_views, session_views, state_views, views

urlpatterns = [
    path("", list_views.run_list, name="run-list"),
    path("fragment/runs/", list_views.run_list_fragment, name="run-list-fragment"),
    path("views/", list_views.saved_view_create, name="saved-view-create"),
    path("views/<int:view_id>/delete/", list_views.saved_view_delete, name="saved-view-delete"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<uuid:run_id>/fragment/", views.run_detail_fragment, name="run-detail-fragment"),
    path("runs/<uuid:run_id>/steps/<int:index>/", views.run_step, name="run-step"),
    path("runs/<uuid:run_id>/timeline/", views.run_timeline, name="run-timeline"),
    path(
        "runs/<uuid:run_id>/steps/<int:index>/state/",
        state_views.run_step_state,
        name="run-step-state",
    ),
    path(
        "runs/<uuid:run_id>/steps/<int:index>/attempts/",
        state_views.run_step_attempts,
        name="run-step-attempts",
    ),
    path(
        "runs/<uuid:run_id>/state/versions/",
        state_views.run_state_versions,
        name="run-state-versions",
    ),
    path(
        "runs/<uuid:run_id>/state/versions/<int:version>/",
        state_views.run_state_version,
        name="run-state-version",
    ),
    path("runs/<uuid:run_id>/events/", state_views.run_events, name="run-events"),
    path("runs/<uuid:run_id>/cancel/", action_views.run_cancel, name="run-cancel"),
    path("runs/<uuid:run_id>/resume/", action_views.run_resume, name="run-resume"),
    path("runs/<uuid:run_id>/compensate/", action_views.run_compensate, name="run-compensate"),
    path("runs/<uuid:run_id>/fork/", action_views.run_fork, name="run-fork"),
    path("runs/<uuid:run_id>/settle/", action_views.run_settle, name="run-settle"),
    path("sessions/", session_views.session_list, name="session-list"),
    path("sessions/<uuid:session_id>/", session_views.session_detail, name="session-detail"),
    path(
        "sessions/<uuid:session_id>/fragment/",
        session_views.session_detail_fragment,
        name="session-detail-fragment",
    ),
    path(
        "sessions/<uuid:session_id>/state/versions/",
        session_views.session_state_versions,
        name="session-state-versions",
    ),
    path(
        "sessions/<uuid:session_id>/state/versions/<int:version>/",
        session_views.session_state_version,
        name="session-state-version",
    ),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
