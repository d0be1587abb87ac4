"""System prompts, content-addressed (issue 36, part 1): each distinct text is kept once per
project, and runs and model calls name it (``Run.prompt``, ``ModelCall.prompt``)."""

from __future__ import annotations

import hashlib

from django.db import models

# The longest system prompt kept (characters), and the longest name and version label a client
# may give a prompt or an agent.
MAX_PROMPT_CHARS = 200_000
MAX_NAME = 200
MAX_VERSION = 100


def prompt_digest(content: str) -> str:
    """SHA-256 hex digest of ``content`` encoded as UTF-8: the prompt's address."""
    return hashlib.sha256(content.encode()).hexdigest()


class SystemPrompt(models.Model):
    """One distinct system prompt text of a project, stored once whatever the number of runs
    and model calls that were sent it: ``sha256`` is ``prompt_digest(content)``, unique per
    project. The name and version label a client gives a prompt are the run's
    (``Run.prompt_name``, ``Run.prompt_version``): the same text may carry several labels.
    Written only by ``runs.control.identity``; never changed once written."""

    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="system_prompts"
    )
    sha256 = models.CharField(max_length=64)
    content = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "sha256"], name="systemprompt_project_sha256_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"prompt {self.sha256[:12]}"
