"""Cases, case sets and eval runs.

A **case** freezes a moment of a run (or of an imported τ-bench conversation): the
``conversation`` (OpenAI chat-format messages) up to the step the agent under test must take,
the ``tool_results`` on record (the run's tool-call ledger: ``{"tool", "args", "result"}``
each), which tools write (``write_tools``: a replay never runs them) and what was ``expected``
(``evals.expectations``). Cases belong to a **case set** of one project; every change to a
set's cases moves its ``version`` up by one, and a case is part of the versions from
``added_in`` to ``removed_in`` (excluded; null: still in it). An **eval run** replays the cases
of one version of a set against an agent version (a label the caller gives) and keeps one
**eval result** per case: the calls the agent made, whether it passed and why not.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class CaseSet(models.Model):
    """A named, versioned set of cases of one project (``name`` unique per project).
    ``version`` starts at 0 (no case) and moves up by one with every case added or removed."""

    project = models.ForeignKey("projects.Project", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="caseset_name_per_project"),
        ]

    def __str__(self) -> str:
        return f"{self.name} (v{self.version})"


class CaseSource(models.TextChoices):
    RUN = "run", "A run"
    TAU_BENCH = "tau-bench", "A τ-bench conversation"
    IMPORT = "import", "A JSON Lines import"


class Case(models.Model):
    """One case (see the module docstring). ``source_run_id`` and ``source_step_index`` name
    the run and step it was made from (a copy, not a foreign key: the case outlives the run's
    retention); ``metadata`` is what the source said of itself (a τ-bench ``task_id`` and
    ``trial``, the run's goal)."""

    case_set = models.ForeignKey(CaseSet, on_delete=models.CASCADE, related_name="cases")
    name = models.CharField(max_length=300)
    source = models.CharField(max_length=16, choices=CaseSource.choices)
    source_run_id = models.UUIDField(null=True, blank=True)
    source_step_index = models.PositiveIntegerField(null=True, blank=True)
    conversation = models.JSONField(default=list)
    tool_results = models.JSONField(default=list)
    write_tools = models.JSONField(default=list)
    expected = models.JSONField()
    metadata = models.JSONField(default=dict, blank=True)
    added_in = models.PositiveIntegerField()
    removed_in = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["case_set", "id"]
        indexes = [models.Index(fields=["case_set", "added_in"], name="case_set_version_idx")]

    def __str__(self) -> str:
        return self.name


class EvalRun(models.Model):
    """One replay of version ``case_set_version`` of a case set by ``agent_version`` (the
    caller's label, e.g. ``airline-agent 1.4`` or a commit): ``total`` cases, ``passed`` of
    them; ``threshold`` (0..1, optional) is the pass rate the caller required."""

    case_set = models.ForeignKey(CaseSet, on_delete=models.CASCADE, related_name="eval_runs")
    case_set_version = models.PositiveIntegerField()
    agent_version = models.CharField(max_length=200)
    total = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    threshold = models.FloatField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.agent_version} on {self.case_set_id} v{self.case_set_version}"

    @property
    def pass_rate(self) -> float:
        """Passed cases over all cases, 0..1 (1.0 for a set without cases)."""
        return self.passed / self.total if self.total else 1.0

    @property
    def below_threshold(self) -> bool:
        """Whether a threshold was given and the pass rate is under it."""
        return self.threshold is not None and self.pass_rate < self.threshold


class EvalResult(models.Model):
    """The outcome of one case in one eval run: the tool calls the agent ``made``
    (``{"tool", "args", "sandboxed"}`` each, in order), its ``final`` answer, ``passed``, and
    ``reason``: why it failed (empty when it passed)."""

    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="results")
    passed = models.BooleanField()
    made = models.JSONField(default=list)
    final = models.TextField(blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["eval_run", "case_id"]
        constraints = [
            models.UniqueConstraint(fields=["eval_run", "case"], name="evalresult_one_per_case"),
        ]

    def __str__(self) -> str:
        return f"case {self.case_id}: {'passed' if self.passed else 'failed'}"
