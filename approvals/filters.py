"""The inbox's filters, search and sort, read from the page's GET parameters (django-filter).

``tool``, ``risk``, ``run`` (id), ``project`` (id), ``age`` (older than: ``1h``, ``1d``,
``7d``), ``q`` (text in the run's goal or the tool's name, case-insensitive), ``same`` (the
arguments' ``Step.args_hash``: with ``tool``, the requests for one identical call), ``show``
(``mine``, ``snoozed``: the user's own marks, ``selectors.inbox_shown``) and ``sort``
(``oldest``, the default; ``newest``; ``risk``: critical first, then oldest). A value that is
not valid (an unknown risk, a malformed run id) is left out of the filtering and shown as the
form's error, never a server error.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import django_filters
from django.db.models import Case, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.models import Risk

AGES = {"1h": timedelta(hours=1), "1d": timedelta(days=1), "7d": timedelta(days=7)}
AGE_CHOICES = [
    ("1h", "older than an hour"),
    ("1d", "older than a day"),
    ("7d", "older than a week"),
]
SORT_CHOICES = [("oldest", "oldest first"), ("newest", "newest first"), ("risk", "riskiest first")]
# The GET parameters that make a reviewer's place in the inbox (with ``page``).
PLACE_PARAMETERS = ("tool", "risk", "run", "project", "age", "q", "same", "show", "sort", "page")
RISK_ORDER = {Risk.LOW: 0, Risk.MEDIUM: 1, Risk.HIGH: 2, Risk.CRITICAL: 3}


class InboxFilter(django_filters.FilterSet):
    """Filters, search and sort of the pending approval requests (see the module)."""

    tool = django_filters.CharFilter(field_name="step__tool")
    # A deny-risk call is refused before any gate: no approval request has that risk.
    risk = django_filters.ChoiceFilter(
        choices=[(value, label) for value, label in Risk.choices if value in RISK_ORDER]
    )
    run = django_filters.UUIDFilter(field_name="run_id")
    project = django_filters.NumberFilter(field_name="run__project_id")
    age = django_filters.ChoiceFilter(choices=AGE_CHOICES, method="older_than")
    q = django_filters.CharFilter(method="search")
    same = django_filters.CharFilter(field_name="step__args_hash", max_length=64)
    sort = django_filters.ChoiceFilter(choices=SORT_CHOICES, method="sort_by", empty_label=None)

    class Meta:
        model = ApprovalRequest
        fields: list[str] = []

    def get_form_class(self) -> Any:
        """django-filter's form class of these filters, built once per filter class: their
        fields do not depend on the request (fixed choices), and building the class (a form
        field per filter, then the form's metaclass) took more than a tenth of a millisecond
        a page. Each form instance still gets its own copy of the fields (Django's
        ``BaseForm``)."""
        built = type(self).__dict__.get("_form_class")
        if built is None:
            built = super().get_form_class()
            type(self)._form_class = built
        return built

    def older_than(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(created_at__lte=timezone.now() - AGES[value])

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        text = value.strip()
        if not text:
            return queryset
        return queryset.filter(Q(run__goal__icontains=text) | Q(step__tool__icontains=text))

    def sort_by(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if value == "newest":
            return queryset.order_by("-created_at", "-id")
        if value == "risk":
            rank = Case(
                *(When(risk=risk, then=Value(n)) for risk, n in RISK_ORDER.items()),
                default=Value(len(RISK_ORDER)),
                output_field=IntegerField(),
            )
            return queryset.alias(risk_rank=rank).order_by("-risk_rank", "created_at", "id")
        return queryset.order_by("created_at", "id")


def place_parameters(data: Any) -> dict[str, str]:
    """The non-empty place parameters (``PLACE_PARAMETERS``) of a query dict, each at most 200
    characters: what a decision carries back to the inbox."""
    found: dict[str, str] = {}
    for name in PLACE_PARAMETERS:
        value = data.get(name, "")
        if isinstance(value, str) and value.strip() and len(value) <= 200:
            found[name] = value
    return found
