"""Page routes of the approvals inbox."""

from django.urls import path

from approvals import decision_views, views

urlpatterns = [
    path("approvals/", views.approval_inbox, name="approval-inbox"),
    path("approvals/<int:approval_id>/", views.approval_detail, name="approval-detail"),
    path("approvals/bulk/", decision_views.approval_decide_bulk, name="approval-decide-bulk"),
    path("approvals/fragment/", views.approval_inbox_fragment, name="approval-inbox-fragment"),
    path("approvals/<int:approval_id>/context/", views.approval_context, name="approval-context"),
    path("approvals/<int:approval_id>/mark/", decision_views.approval_mark, name="approval-mark"),
    path(
        "approvals/<int:approval_id>/decide/",
        decision_views.approval_decide,
        name="approval-decide",
    ),
]
