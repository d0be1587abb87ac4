"""The OpenAPI schema documents every status the API can answer, not only each view's own.

The refusals every view shares (no credentials, no permission, malformed input, an unknown
id, a body that is not JSON, an ``Idempotency-Key`` in flight or reused) come from
``agentops.api``, DRF and ``runs.idempotency``, not from the views: a drf-spectacular
postprocessing hook adds them to each operation they apply to, all with the one error body
(``agentops.api.ErrorSerializer``), so a client (and Schemathesis) finds every status
documented.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

ERROR_SCHEMA = "Error"
ERROR_REF = f"#/components/schemas/{ERROR_SCHEMA}"

ALWAYS = {
    "401": "No valid credentials: send `Authorization: Token <key>`.",
    "403": "Signed in without the permission this operation needs (or, signed in with a "
    "session, a POST without its CSRF token).",
}
WITH_INPUT = {"400": "Malformed input (query, header or body); `field` names it."}
WITH_PATH_ID = {"404": "No object with this id."}
WITH_BODY = {"415": "The body is not `application/json`."}
WITH_IDEMPOTENCY_KEY = {
    "409": "A request with this Idempotency-Key is still being processed.",
    "422": "This Idempotency-Key was already used for a different request.",
}


def _shared_refusals(operation: dict[str, Any]) -> dict[str, str]:
    """Status → description of the refusals that apply to ``operation`` (an OpenAPI
    operation object)."""
    parameters = operation.get("parameters", [])
    refusals = dict(ALWAYS)
    if operation.get("requestBody") or any(p["in"] != "path" for p in parameters):
        refusals.update(WITH_INPUT)
    if any(p["in"] == "path" for p in parameters):
        refusals.update(WITH_PATH_ID)
    if operation.get("requestBody"):
        refusals.update(WITH_BODY)
    if any(p["in"] == "header" and p["name"] == "Idempotency-Key" for p in parameters):
        refusals.update(WITH_IDEMPOTENCY_KEY)
    return refusals


def document_shared_refusals(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook (``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``):
    add to every operation of ``result`` (the OpenAPI document) the shared refusals that apply
    to it, as ``Error`` responses. A status the view documents itself keeps its description;
    the key's 409 is appended to a view's own 409 (the run's state forbids the action).

    Raises:
        ImproperlyConfigured: no view uses ``ErrorSerializer``, so the ``Error`` component is
            missing.
    """
    if ERROR_SCHEMA not in result.get("components", {}).get("schemas", {}):
        raise ImproperlyConfigured(f"the OpenAPI schema has no {ERROR_SCHEMA} component")
    for path_item in result["paths"].values():
        for operation in path_item.values():
            responses = operation["responses"]
            for code, description in _shared_refusals(operation).items():
                documented = responses.get(code)
                if documented is None:
                    responses[code] = {
                        "content": {"application/json": {"schema": {"$ref": ERROR_REF}}},
                        "description": description,
                    }
                elif code in WITH_IDEMPOTENCY_KEY and description not in documented["description"]:
                    documented["description"] = f"{documented['description']} Or: {description}"
    return result
