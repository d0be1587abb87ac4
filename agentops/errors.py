"""Errors services raise for their callers to translate (API: 400, 409; pages: a message)."""


class InvalidInput(Exception):
    """The request's content is wrong (HTTP 400). ``field`` names the bad part, if one."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.message = message
        self.field = field


class Conflict(Exception):
    """The request is well-formed but the object's state forbids it now (HTTP 409)."""
