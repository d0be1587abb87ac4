"""The input and output shapes of what drives a run, as its client reports it (agent name and
version, system prompt, model parameters: ``runs.control.identity``), shared by the run
creation and the conversation endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentops.api import StrictSerializer
from runs.control.identity import IDENTITY_KEYS


class PromptRefSerializer(serializers.Serializer):
    """The system prompt a run's agent was last sent: ``sha256`` of its text (its address)
    and the ``name`` and ``version`` label its client gave (empty: none)."""

    sha256 = serializers.CharField()
    name = serializers.CharField()
    version = serializers.CharField()


class IdentityInputSerializer(StrictSerializer):
    """What drives a run, as its client reports it (``runs.control.identity``; each key
    optional, given ones replace the run's): ``agent_name``, ``agent_version``, ``prompt``
    (``{"content", "name"?, "version"?}``: the system prompt, kept once per distinct text),
    ``model_parameters`` (a JSON object: temperature, top_p, ...)."""

    agent_name = serializers.CharField(required=False, max_length=200, trim_whitespace=False)
    agent_version = serializers.CharField(required=False, max_length=100, trim_whitespace=False)
    prompt = serializers.DictField(
        required=False,
        help_text="content: the system prompt's text; name and version: the label you give it.",
    )
    model_parameters = serializers.DictField(
        required=False, help_text="The model's parameters (temperature, top_p, max_tokens...)."
    )


def identity_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The identity keys (``runs.control.identity.IDENTITY_KEYS``) taken out of a request's
    validated ``data``, for the services' ``identity`` argument."""
    return {key: data.pop(key) for key in IDENTITY_KEYS if key in data}
