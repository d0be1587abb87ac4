"""Errors services raise for their callers to translate (API: 400, 409; pages: a message)."""


class InvalidInput(Exception):
    """The request's content is wrong (HTTP 400). ``field`` names the bad part, if one."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.message = message
        self.field = field


class Conflict(Exception):
    """The request is well-formed but the object's state forbids it now (HTTP 409)."""


class TooLarge(InvalidInput):
    """The request's content is over a size limit, which ``message`` names (HTTP 413)."""


class PreconditionFailed(Exception):
    """The client's ``If-Match`` names a version that is no longer current (HTTP 412, RFC 9110
    §15.5.13). ``version`` is the current version and ``etag`` its entity tag."""

    def __init__(self, message: str, *, version: int, etag: str):
        super().__init__(message)
        self.message = message
        self.version = version
        self.etag = etag
