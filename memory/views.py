"""Memory pages: browse a project's namespaces and search its items, an item's page (value,
provenance with links to the run and step that wrote it, history with what each version
changed) and deleting an item with a reason.

Per project, as every page: the project picker offers the projects where the user may see
memory; an item of another project is a 404.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from agentops.actors import Actor
from agentops.errors import InvalidInput, PreconditionFailed
from memory import selectors, services
from memory.diffs import version_changes
from memory.models import MemoryItem, MemoryVersion
from memory.namespaces import namespace_labels
from projects.access import Access
from projects.models import Project
from projects.views import object_permission

VIEW: Final = "memory.view_memoryitem"
DELETE: Final = "memory.delete_memoryitem"
ITEMS_PER_PAGE: Final = 50
# How many namespaces one level of the browser lists.
NAMESPACES_SHOWN: Final = 100


def _item_project(item_id: uuid.UUID) -> int | None:
    """The project of item ``item_id``, live or gone (its history names it)."""
    found = MemoryItem.objects.filter(pk=item_id).values_list("project_id", flat=True).first()
    if found is None:
        found = (
            MemoryVersion.objects.filter(item_id=item_id)
            .values_list("project_id", flat=True)
            .first()
        )
    return found


def _chosen_project(request: HttpRequest, projects: list[Project]) -> Project | None:
    slug = request.GET.get("project", "")
    for project in projects:
        if project.slug == slug:
            return project
    return projects[0] if projects and not slug else None


def _offset(raw: str) -> int:
    if raw.isascii() and raw.isdigit() and int(raw) <= selectors.MAX_OFFSET:
        return int(raw)
    return 0


@require_GET
@login_required
@permission_required(VIEW, raise_exception=True)
def memory_browse(request: HttpRequest) -> HttpResponse:
    """A project's memory (``?project=`` slug; default the first): the namespaces one label
    below ``?namespace=`` (labels joined by ``.``), and the items under it that match
    ``?q=`` (full text), 50 a page (``?offset=``). A bad namespace or query is said on the
    page, never a 500."""
    projects = Access(request.user).projects(VIEW)
    project = _chosen_project(request, projects)
    context: dict[str, Any] = {"nav": "memory", "projects": projects, "project": project}
    raw_namespace = request.GET.get("namespace", "")
    query = request.GET.get("q", "")
    offset = _offset(request.GET.get("offset", ""))
    context.update(namespace_text=raw_namespace, query=query, offset=offset)
    if project is None:
        if request.GET.get("project"):
            raise Http404("no such project")
        return render(request, "memory/browse.html", context)
    try:
        labels = namespace_labels(raw_namespace, allow_empty=True)
        children = selectors.memory_list_namespaces(
            project_id=project.pk, prefix=labels, max_depth=len(labels) + 1, limit=100
        )
        found = selectors.memory_search(
            project_id=project.pk,
            namespace_prefix=labels,
            query=query or None,
            limit=ITEMS_PER_PAGE,
            offset=offset,
        )
    except InvalidInput as exc:
        context["problem"] = exc.message
        return render(request, "memory/browse.html", context, status=400)
    context.update(
        labels=labels,
        crumbs=[".".join(labels[: i + 1]) for i in range(len(labels))],
        children=[child for child in children if len(child) > len(labels)],
        found=found,
        next_offset=offset + ITEMS_PER_PAGE if len(found) == ITEMS_PER_PAGE else None,
    )
    return render(request, "memory/browse.html", context)


@require_GET
@login_required
@permission_required(VIEW, raise_exception=True)
@object_permission(VIEW, _item_project, "item_id")
def memory_item(request: HttpRequest, item_id: uuid.UUID) -> HttpResponse:
    """An item's page: its current value (or that it was deleted or expired), provenance of
    every version (links to the run and step that wrote it), each version's changes from the
    one before, and the delete form for those who may.

    Raises:
        Http404: no such item, or one of a project the user may not see.
    """
    item = selectors.live_items().filter(pk=item_id).select_related("project").first()
    versions = selectors.memory_item_history(item_id=item_id)
    if item is None and not versions:
        raise Http404("no such memory item")
    project_id = item.project_id if item is not None else versions[0].project_id
    context = {
        "nav": "memory",
        "item": item,
        "latest": versions[0] if versions else None,
        "history": version_changes(versions),
        "may_delete": item is not None and Access(request.user).can(DELETE, project_id),
        "project": Project.objects.get(pk=project_id),
    }
    return render(request, "memory/item.html", context)


@require_POST
@login_required
@permission_required(DELETE, raise_exception=True)
@object_permission(DELETE, _item_project, "item_id")
def memory_item_delete(request: HttpRequest, item_id: uuid.UUID) -> HttpResponse:
    """Delete the item (POST ``reason``, required): its history keeps the reason. A missing
    reason, or one it cannot keep, is said as a message and deletes nothing."""
    item = MemoryItem.objects.filter(pk=item_id).first()
    reason = request.POST.get("reason", "").strip()
    if item is None:
        messages.error(request, "This item is already gone.")
    elif not reason:
        messages.error(request, "Say why the item is deleted: the reason is kept in its history.")
    else:
        try:
            services.memory_delete(
                actor=Actor.for_user(request.user),
                project=item.project,
                namespace=item.namespace_path,
                key=item.key,
                reason=reason,
                if_match=request.POST.get("etag") or None,
            )
        except InvalidInput as exc:
            messages.error(request, f"Cannot delete: {exc.message}.")
        except PreconditionFailed:
            messages.error(request, "The item changed since you opened it: check it again.")
        else:
            messages.success(request, "Memory item deleted.")
    return redirect("memory-item", item_id=item_id)
