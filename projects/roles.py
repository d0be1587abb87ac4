"""The four project roles and the permissions each grants inside its project.

Permissions are Django permission names (``app_label.codename``) of the apps above this one;
they are plain strings here so this app imports none of them.

- ``viewer``: see runs, steps, approvals, audit events and memory items.
- ``operator``: a viewer who also creates, drives, cancels and resumes runs, and writes and
  deletes memory items.
- ``reviewer``: a viewer who also decides approval requests.
- ``admin``: operator and reviewer together, who also registers the project's state schemas
  (``runs.StateSchema``) and may erase a subject's data (``runs.erase_subject``: their
  sessions, conversations and state), and edits the project's policy (its tool grant and
  its own risk rules, on top of the global defaults). Four eyes still holds: nobody
  decides an approval for a run or step they asked for (``approvals.policy``).
"""

from django.db import models


class Role(models.TextChoices):
    """A member's role in one project."""

    VIEWER = "viewer", "Viewer"
    OPERATOR = "operator", "Operator"
    REVIEWER = "reviewer", "Reviewer"
    ADMIN = "admin", "Admin"


VIEW = frozenset(
    {
        "runs.view_run",
        "runs.view_step",
        "approvals.view_approvalrequest",
        "audit.view_auditevent",
        "memory.view_memoryitem",
        "evals.view_caseset",
    }
)
OPERATE = frozenset(
    {
        "runs.add_run",
        "runs.cancel_run",
        "runs.resume_run",
        "runs.drive_run",
        "memory.change_memoryitem",
        "memory.delete_memoryitem",
        "evals.change_caseset",
        "evals.add_evalrun",
    }
)
DECIDE = frozenset({"approvals.decide_approvalrequest"})
MANAGE = frozenset({"runs.add_stateschema"})
# The project's policy (``runs.policy``): its tool grant and its own risk rules, through the
# API (``projects.manage_policy``) and admin (the risk rule model's permissions).
POLICY = frozenset(
    {
        "projects.manage_policy",
        "approvals.view_riskrule",
        "approvals.add_riskrule",
        "approvals.change_riskrule",
        "approvals.delete_riskrule",
    }
)
ERASE = frozenset({"runs.erase_subject"})

ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    Role.VIEWER: VIEW,
    Role.OPERATOR: VIEW | OPERATE,
    Role.REVIEWER: VIEW | DECIDE,
    Role.ADMIN: VIEW | OPERATE | DECIDE | MANAGE | ERASE | POLICY,
}
# Every permission a project role can grant: a check of any other permission (admin's model
# permissions, say) is not a project matter and is left to Django's own backend.
PROJECT_PERMISSIONS = frozenset().union(*ROLE_PERMISSIONS.values())
