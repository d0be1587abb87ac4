"""The two roles, as Django groups with their permissions (created by migration runs 0002).

- ``operators``: create, view, drive, cancel and resume runs; view approvals.
- ``reviewers``: view runs and approvals; approve or reject approval requests.
Superusers can do everything.
"""

from typing import Any

OPERATORS = "operators"
REVIEWERS = "reviewers"

ROLE_PERMISSIONS: dict[str, list[tuple[str, str]]] = {
    OPERATORS: [
        ("runs", "add_run"),
        ("runs", "view_run"),
        ("runs", "cancel_run"),
        ("runs", "resume_run"),
        ("runs", "drive_run"),
        ("runs", "view_step"),
        ("approvals", "view_approvalrequest"),
        ("audit", "view_auditevent"),
    ],
    REVIEWERS: [
        ("runs", "view_run"),
        ("runs", "view_step"),
        ("approvals", "view_approvalrequest"),
        ("approvals", "decide_approvalrequest"),
        ("audit", "view_auditevent"),
    ],
}


def ensure_roles(group_model: Any, permission_model: Any) -> None:
    """Create or update the role groups with exactly their permissions.

    Takes the models as arguments so a migration can pass its historical models.
    """
    for name, perms in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        wanted = [
            permission_model.objects.get(content_type__app_label=app, codename=codename)
            for app, codename in perms
        ]
        group.permissions.set(wanted)
