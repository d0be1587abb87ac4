"""How the OpenAPI schema (drf-spectacular) describes the API token header."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class TokenScheme(OpenApiAuthenticationExtension):
    """``Authorization: Token <token>`` (``agentops.tokens.TokenAuthentication``)."""

    target_class = "agentops.tokens.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <token>`: a project-scoped API token "
            "(`manage.py create_api_token`); expired or revoked tokens get a 401.",
        }
