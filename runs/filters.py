"""The filters of the runs list, shared by the page (``runs.views``) and the API (``runs.api``).

Every filter is a GET parameter; they combine (AND). ``RunFilter.form.errors`` says what is
wrong with a bad value: the API answers 400 with it, the page shows it instead of the list.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet
from django_filters import rest_framework as filters

from agentops.api import StrictFilterSet
from runs.models import AgentKind, AgentSession, Run, SessionStatus, Step
from runs.models.prompts import MAX_NAME, MAX_VERSION
from runs.search import run_search_filter
from runs.statuses import run_status_choices, run_status_filter

# Longest value of a text filter: a goal fragment, a tool name (Step.tool), a user name.
MAX_GOAL_TEXT = 200
MAX_SEARCH_TEXT = 200
MAX_TOOL_NAME = 128
MAX_USERNAME = 150


class RunFilter(StrictFilterSet):
    """Filters of the runs list.

    - ``status``: the status as shown (``runs.statuses``, e.g. ``awaiting_approval``);
    - ``agent``: an ``AgentKind`` value (``plan``, ``client``, ...);
    - ``project``: a project slug (a project the user cannot see lists nothing);
    - ``goal``: text the goal contains (case-insensitive);
    - ``q``: words found in the goal, a step's tool-call arguments or result, or the
      conversation (full-text: ``runs.search``; a reservation id in a call's arguments finds
      its run);
    - ``tool``: runs with at least one step calling this tool (exact name);
    - ``requester``: the user name of who requested the run (exact);
    - ``agent_name``, ``agent_version``: the agent's name and version its client reported
      (exact; ``runs.control.identity``);
    - ``prompt_name``, ``prompt_version``: the name and version label of the system prompt
      it was last sent (exact); ``prompt_sha256``: that prompt's SHA-256 (hex, exact);
    - ``created_from`` / ``created_to``: ISO 8601 date-times (a value without a time zone is
      UTC); runs created at or after / before that moment.

    An unknown status or agent, a malformed date-time, a text longer than its field allows or
    holding a NUL character is an error naming the filter; so is a filter given empty (the
    API; the page drops empty fields before filtering).
    """

    status = filters.ChoiceFilter(
        choices=run_status_choices(), method="filter_status", label="Status as shown"
    )
    agent = filters.ChoiceFilter(choices=AgentKind.choices, label="Agent kind")
    project = filters.CharFilter(field_name="project__slug", max_length=50, label="Project slug")
    goal = filters.CharFilter(
        field_name="goal",
        lookup_expr="icontains",
        max_length=MAX_GOAL_TEXT,
        label="Text the goal contains (case-insensitive)",
    )
    q = filters.CharFilter(
        method="filter_search",
        max_length=MAX_SEARCH_TEXT,
        label="Words in the goal, a tool call's arguments or result, or the conversation",
    )
    tool = filters.CharFilter(
        method="filter_tool", max_length=MAX_TOOL_NAME, label="A tool one of its steps calls"
    )
    requester = filters.CharFilter(
        field_name="requested_by__username",
        max_length=MAX_USERNAME,
        label="User name of who requested the run",
    )
    agent_name = filters.CharFilter(max_length=MAX_NAME, label="Agent name (exact)")
    agent_version = filters.CharFilter(max_length=MAX_VERSION, label="Agent version (exact)")
    prompt_name = filters.CharFilter(max_length=MAX_NAME, label="Prompt name (exact)")
    prompt_version = filters.CharFilter(
        max_length=MAX_VERSION, label="Prompt version label (exact)"
    )
    prompt_sha256 = filters.CharFilter(
        field_name="prompt__sha256", max_length=64, label="SHA-256 of the system prompt (hex)"
    )
    created_from = filters.IsoDateTimeFilter(
        field_name="created_at",
        lookup_expr="gte",
        label="Created at or after (ISO 8601; UTC without a time zone)",
    )
    created_to = filters.IsoDateTimeFilter(
        field_name="created_at",
        lookup_expr="lt",
        label="Created before (ISO 8601; UTC without a time zone)",
    )

    class Meta:
        model = Run
        fields = [
            "status",
            "agent",
            "project",
            "goal",
            "q",
            "tool",
            "requester",
            "agent_name",
            "agent_version",
            "prompt_name",
            "prompt_version",
            "prompt_sha256",
            "created_from",
            "created_to",
        ]

    def filter_status(self, queryset: QuerySet[Run], name: str, value: str) -> QuerySet[Run]:
        """Runs whose status as shown is ``value`` (``awaiting_approval``: waiting for a
        reviewer)."""
        return queryset.filter(**run_status_filter(value))

    def filter_search(self, queryset: QuerySet[Run], name: str, value: str) -> QuerySet[Run]:
        """Runs whose goal, steps' arguments or results, or messages hold the words of
        ``value`` (``runs.search.run_search_filter``)."""
        return queryset.filter(run_search_filter(value))

    def filter_tool(self, queryset: QuerySet[Run], name: str, value: str) -> QuerySet[Run]:
        """Runs with a step calling the tool ``value``: a semi-join (``EXISTS``), so a run
        with several such steps is listed once and the page's count stays one query."""
        return queryset.filter(Exists(Step.objects.filter(run_id=OuterRef("pk"), tool=value)))

    def is_valid(self) -> bool:
        """Whether every filter has a valid value, and ``created_from`` is before
        ``created_to`` when both are given (errors in ``errors``)."""
        valid = super().is_valid()
        if valid:
            start = self.form.cleaned_data.get("created_from")
            end = self.form.cleaned_data.get("created_to")
            if start and end and start >= end:
                self.form.add_error("created_to", "must be later than created_from")
                valid = False
        return valid


def filter_problems(filterset: RunFilter) -> list[str]:
    """The errors of an invalid ``filterset`` as ``"<filter>: <message>"`` lines."""
    return [
        f"{name}: {message}" for name, messages in filterset.errors.items() for message in messages
    ]


class SessionFilter(StrictFilterSet):
    """Filters of the sessions list: ``external_id`` and ``subject`` (exact), ``status``
    (open, closed), ``project`` (slug), ``created_from`` / ``created_to`` (ISO 8601; as the
    runs list's)."""

    external_id = filters.CharFilter(max_length=200, label="The client's id (exact)")
    subject = filters.CharFilter(max_length=200, label="The end user's subject id (exact)")
    status = filters.ChoiceFilter(choices=SessionStatus.choices, label="Status")
    project = filters.CharFilter(field_name="project__slug", max_length=50, label="Project slug")
    created_from = filters.IsoDateTimeFilter(
        field_name="created_at", lookup_expr="gte", label="Created at or after (ISO 8601)"
    )
    created_to = filters.IsoDateTimeFilter(
        field_name="created_at", lookup_expr="lt", label="Created before (ISO 8601)"
    )

    class Meta:
        model = AgentSession
        fields = ["external_id", "subject", "status", "project", "created_from", "created_to"]
